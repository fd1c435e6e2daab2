// corio::net::resolve: numeric hosts parsed inline, names through getaddrinfo on the blocking pool.
#include <corio/net/error.hpp>
#include <corio/net/resolve.hpp>
#include <corio/runtime.hpp>

#include <arpa/inet.h>
#include <netdb.h>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
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

// What a failed lookup says before the error's own message. A host that looks like "host:port" (one
// ':', which no IPv6 address has, or a bracketed address followed by ':') fails as a name nobody
// knows; the hint tells the caller where the port goes instead.
std::string failure_context(const std::string& host) {
  if (host.empty()) {
    return "corio::net::resolve of an empty host name";
  }
  std::string context = "corio::net::resolve " + host;
  bool one_colon = std::count(host.begin(), host.end(), ':') == 1;
  if (one_colon || (host.starts_with('[') && host.find("]:") != std::string::npos)) {
    context += " (the port is a separate argument: resolve(host, port), not resolve(\"host:port\", ...))";
  }
  return context;
}

}  // namespace

task<std::vector<endpoint>> resolve(std::string host, std::uint16_t port) {
  // getaddrinfo and inet_pton read the host as a C string and would answer for the part before a NUL.
  if (auto nul = host.find('\0'); nul != std::string::npos) {
    throw std::system_error(std::error_code(EAI_NONAME, resolve_category()),
                            "corio::net::resolve: the host holds a NUL character (at offset " + std::to_string(nul) +
                                "), which no name or address can");
  }
  if (auto numeric = endpoint::parse(host, port)) {
    co_return std::vector<endpoint>{*numeric};
  }
  // glibc's getaddrinfo reads the legacy numeric forms inet_aton takes ("010.0.0.1" in octal is
  // 8.0.0.1, "127.1" is 127.0.0.1, "80" is 0.0.0.80), which endpoint::parse refuses: an address
  // checked with parse could then reach another one through a lookup. They are not names either.
  if (in_addr legacy{}; ::inet_aton(host.c_str(), &legacy) != 0) {
    throw std::system_error(std::error_code(EAI_NONAME, resolve_category()),
                            "corio::net::resolve " + host +
                                ": not an address in dotted-decimal form (four decimal parts without leading zeros), "
                                "nor a name");
  }
  if (corio::detail::current_blocking_pool() == nullptr) {
    throw std::logic_error(
        "corio::net::resolve: looking up a name needs an event loop or runtime on this thread (its blocking pool)");
  }
  // The call owns a copy of the host: cancelled (with_timeout, a task's cancel), this frame goes at once
  // while the call runs on, detached. Named, not a temporary in the co_await (g++ 12, README).
  auto call = spawn_blocking([host, port] { return getaddrinfo_blocking(host, port); });
  lookup result = co_await std::move(call);
  if (result.status != 0) {
    if (result.status == EAI_SYSTEM) {
      throw std::system_error(std::error_code(result.system_error, std::system_category()), failure_context(host));
    }
    throw std::system_error(std::error_code(result.status, resolve_category()), failure_context(host));
  }
  co_return std::move(result.endpoints);
}

}  // namespace corio::net
