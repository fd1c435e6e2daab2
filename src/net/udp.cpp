// corio::net::udp_socket: bind, and the msghdr set-up of send_to / recv_from.
#include <corio/net/udp_socket.hpp>

#include <cerrno>
#include <cstring>
#include <memory>
#include <new>
#include <system_error>

#include "net/socket_name.hpp"

namespace corio::net {

namespace detail {

void message_awaiter::prepare() noexcept {
  vector_ = {data_, size_};
  message_ = {};
  message_.msg_iov = &vector_;
  message_.msg_iovlen = 1;
  if (op_.kind == corio::detail::io_kind::sendmsg) {
    std::memcpy(&address_, peer_.data(), peer_.size());
    message_.msg_namelen = peer_.size();
  } else {
    message_.msg_namelen = sizeof(address_);
  }
  message_.msg_name = &address_;
  op_.buffer = &message_;
}

datagram recv_from_awaiter::await_resume() {
  datagram result;
  if (check()) {
    result.size = static_cast<std::size_t>(op_.result);
    result.truncated = (message_.msg_flags & MSG_TRUNC) != 0;
    result.from = endpoint::from_sockaddr(reinterpret_cast<const sockaddr*>(&address_), message_.msg_namelen)
                      .value_or(endpoint());
  }
  return result;
}

}  // namespace detail

udp_socket udp_socket::bind(const endpoint& local) {
  return detail::or_throw("corio::net::udp_socket::bind to " + local.to_string(),
                          [&](std::error_code& error) { return bind(local, error); });
}

udp_socket udp_socket::bind(const endpoint& local, std::error_code& error) noexcept {
  udp_socket socket;
  socket.socket_ = detail::open_bound(local, SOCK_DGRAM, error, [](int) { return true; });
  if (!error) {
    try {
      socket.kept_ = std::make_unique<corio::detail::datagram_stash>();
    } catch (const std::bad_alloc&) {
      error = std::make_error_code(std::errc::not_enough_memory);
      socket.close();
    }
  }
  return socket;
}

endpoint udp_socket::local_endpoint() const {
  return detail::socket_name(socket_.get(), false, "corio::net::udp_socket::local_endpoint");
}

endpoint udp_socket::local_endpoint(std::error_code& error) const noexcept {
  return detail::socket_name(socket_.get(), false, error);
}

}  // namespace corio::net
