// corio::net::resolve: numeric hosts parsed inline, names through getaddrinfo on the blocking pool.
#include <corio/net/error.hpp>
#include <corio/net/resolve.hpp>
#include <corio/runtime.hpp>

#include <netdb.h>

#include <memory>
#include <stdexcept>
#include <system_error>

namespace corio::net {
namespace {

struct lookup {
  int status = 0;
  int system_error = 0;  // errno, for EAI_SYSTEM (read on the blocking thread)
  std::vector<endpoint> endpoints;
};

lookup getaddrinfo_blocking(const std::string& host, std::uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_ADDRCONFIG;
  addrinfo* found = nullptr;
  lookup result;
  result.status = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (result.status != 0) {
    result.system_error = errno;
    return result;
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owner(found, &::freeaddrinfo);
  for (addrinfo* each = found; each != nullptr; each = each->ai_next) {
    if (auto ep = endpoint::from_sockaddr(each->ai_addr, each->ai_addrlen)) {
      ep->set_port(port);
      result.endpoints.push_back(*ep);
    }
  }
  return result;
}

}  // namespace

task<std::vector<endpoint>> resolve(std::string host, std::uint16_t port) {
  if (auto numeric = endpoint::parse(host, port)) {
    co_return std::vector<endpoint>{*numeric};
  }
  if (corio::detail::current_blocking_pool() == nullptr) {
    throw std::logic_error("corio::net::resolve: looking up a name needs a runtime worker (its blocking pool)");
  }
  lookup result = co_await spawn_blocking([&host, port] { return getaddrinfo_blocking(host, port); });
  if (result.status != 0) {
    if (result.status == EAI_SYSTEM) {
      throw std::system_error(std::error_code(result.system_error, std::system_category()), "corio::net::resolve");
    }
    throw std::system_error(std::error_code(result.status, resolve_category()), "corio::net::resolve " + host);
  }
  co_return std::move(result.endpoints);
}

}  // namespace corio::net
