// corio::net::udp_socket: bind, connect, and the msghdr set-up of send_to / recv_from (and send / recv).
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
  if (op_.kind == corio::detail::io_kind::recvmsg) {
    message_.msg_name = &address_;
    message_.msg_namelen = sizeof(address_);
  } else if (to_) {
    std::memcpy(&address_, to_->data(), to_->size());
    message_.msg_name = &address_;
    message_.msg_namelen = to_->size();
  }  // else the connected peer: no name
  op_.buffer = &message_;
}

recv_from_awaiter::~recv_from_awaiter() { leave_datagrams(resumed_); }

datagram recv_from_awaiter::await_resume() {
  resumed_ = true;  // what the op completed with is check()'s from here (returned, or kept in the stash)
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
      socket.kept_ = std::make_shared<corio::detail::datagram_stash>();
    } catch (const std::bad_alloc&) {
      error = std::make_error_code(std::errc::not_enough_memory);
      socket.close();
    }
  }
  return socket;
}

void udp_socket::connect(const endpoint& peer) {
  detail::or_throw("corio::net::udp_socket::connect to " + peer.to_string(), [&](std::error_code& error) {
    connect(peer, error);
    return 0;
  });
}

void udp_socket::connect(const endpoint& peer, std::error_code& error) noexcept {
  if (::connect(socket_.get(), peer.data(), peer.size()) != 0) {
    error.assign(errno, std::system_category());
    return;
  }
  error.clear();
}

endpoint udp_socket::peer_endpoint() const {
  return detail::socket_name(socket_.get(), true, "corio::net::udp_socket::peer_endpoint");
}

endpoint udp_socket::peer_endpoint(std::error_code& error) const noexcept {
  return detail::socket_name(socket_.get(), true, error);
}

endpoint udp_socket::local_endpoint() const {
  return detail::socket_name(socket_.get(), false, "corio::net::udp_socket::local_endpoint");
}

endpoint udp_socket::local_endpoint(std::error_code& error) const noexcept {
  return detail::socket_name(socket_.get(), false, error);
}

}  // namespace corio::net
