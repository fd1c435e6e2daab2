#pragma once
// Helpers the socket types share: their addresses, and the throwing form of an error_code call.
#include <sys/socket.h>

#include <cerrno>
#include <string>
#include <system_error>

#include <corio/detail/socket.hpp>
#include <corio/net/endpoint.hpp>

namespace corio::net::detail {

/// getsockname (or getpeername) as an endpoint; an empty one with `error` set if the call failed.
inline endpoint socket_name(int fd, bool peer, std::error_code& error) noexcept {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  auto* raw = reinterpret_cast<sockaddr*>(&address);
  if ((peer ? ::getpeername(fd, raw, &length) : ::getsockname(fd, raw, &length)) < 0) {
    error.assign(errno, std::system_category());
    return endpoint();
  }
  error.clear();
  return endpoint::from_sockaddr(raw, length).value_or(endpoint());
}

/// Calls `call(error)` and throws std::system_error naming `what` (a C string or a std::string) if it
/// stored an error; a C string is turned into a std::string only then.
template <class What, class Call>
auto or_throw(const What& what, Call call) {
  std::error_code error;
  auto result = call(error);
  if (error) {
    throw std::system_error(error, what);
  }
  return result;
}

/// socket_name's throwing form: std::system_error naming `what`.
inline endpoint socket_name(int fd, bool peer, const char* what) {
  return or_throw(what, [&](std::error_code& error) { return socket_name(fd, peer, error); });
}

/// Opens a socket of `local`'s family, runs `configure(fd)` (false: failed, errno set), binds it.
/// Returns the owned socket, or a closed one with `error` set.
template <class Configure>
corio::detail::socket_fd open_bound(const endpoint& local, int type, std::error_code& error, Configure configure) {
  int fd = corio::detail::open_socket(local.family(), type);
  if (fd < 0) {
    error.assign(-fd, std::system_category());
    return {};
  }
  corio::detail::socket_fd socket(fd);
  if (!configure(fd) || ::bind(fd, local.data(), local.size()) < 0) {
    error.assign(errno, std::system_category());
    return {};
  }
  error.clear();
  return socket;
}

}  // namespace corio::net::detail
