#pragma once
// corio::net::udp_socket: a UDP socket whose send_to and recv_from suspend the awaiting task.
#include <sys/socket.h>
#include <sys/uio.h>

#include <coroutine>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <system_error>
#include <utility>

#include <corio/detail/datagram_stash.hpp>
#include <corio/detail/socket.hpp>
#include <corio/net/endpoint.hpp>

namespace corio::net {

/// What recv_from yields: the bytes placed in the buffer, the sender, and whether the datagram was cut.
struct datagram {
  std::size_t size = 0;  ///< at most the buffer's size
  endpoint from;
  /// The datagram was longer than the buffer: `size` bytes of it are in the buffer and the kernel
  /// discarded the rest (msghdr::msg_flags & MSG_TRUNC, which both backends fill).
  bool truncated = false;
};

namespace detail {

/// sendmsg/recvmsg, with an address or to the connected peer; the msghdr lives in the awaiter (the awaiting frame).
class message_awaiter : public corio::detail::io_awaiter {
 public:
  message_awaiter(corio::detail::io_kind kind, corio::detail::socket_id socket, const void* data, std::size_t size,
                  const endpoint* to, const char* what, std::error_code* error) noexcept
      : io_awaiter(what, error), data_(const_cast<void*>(data)), size_(size) {
    op_.kind = kind;
    target(socket);
    if (to != nullptr) {
      to_ = *to;
    }
  }
  message_awaiter(message_awaiter&& other) noexcept = default;

  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> self) {
    prepare();
    return start(self);
  }

 protected:
  void prepare() noexcept;

  void* data_;
  std::size_t size_;
  std::optional<endpoint> to_;  // a send's own destination (send_to); none: the connected peer (send)
  sockaddr_storage address_{};
  iovec vector_{};
  msghdr message_{};
};

class send_to_awaiter : public message_awaiter {
 public:
  using message_awaiter::message_awaiter;
  std::size_t await_resume() { return check() ? static_cast<std::size_t>(op_.result) : 0; }
};

class recv_from_awaiter : public message_awaiter {
 public:
  recv_from_awaiter(corio::detail::socket_id socket, std::span<std::byte> buffer,
                    std::shared_ptr<corio::detail::datagram_stash> kept, const char* what,
                    std::error_code* error) noexcept
      : message_awaiter(corio::detail::io_kind::recvmsg, socket, buffer.data(), buffer.size(), nullptr, what, error),
        kept_(std::move(kept)) {}
  recv_from_awaiter(recv_from_awaiter&& other) noexcept = default;
  /// A frame destroyed while this receive waited (its executor's shutdown): unlists it from the stash
  /// and leaves there a datagram handed to it, and the one its op completed with that it never resumed
  /// to take, for the socket's next receive.
  ~recv_from_awaiter();

  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> self) {
    prepare();
    if (kept_ != nullptr) {
      keep_when_cancelled(*kept_, waiter_);
    }
    return start(self);
  }
  datagram await_resume();

 private:
  std::shared_ptr<corio::detail::datagram_stash> kept_;  // shared with the socket: a receive may outlive it
  corio::detail::datagram_waiter waiter_;
  bool resumed_ = false;
};

}  // namespace detail

/// A UDP socket. Move-only; closes on destruction. send_to and recv_from (and, once connected, send and recv) are
/// awaitables with the error, cancellation and resumption rules of tcp_stream's operations. Several tasks may
/// receive on one socket at once (on any workers): each datagram goes to exactly one of them, as with Go's
/// PacketConn. Cancel them before closing or destroying the socket (moving it while one waits is fine); a receive
/// closed under, on any thread, still ends with std::errc::operation_canceled (README, Limitations). recv_from
/// and recv are cancel-safe, as a stream's reads are: a receive cancelled (a lost when_any, a deadline) just as
/// its datagram arrived leaves it with the socket, which hands it to a receive already waiting, or else returns
/// it first from the next receive.
///
///     auto socket = corio::net::udp_socket::bind(corio::net::endpoint::loopback_v4(0));
///     co_await socket.send_to(std::as_bytes(std::span("hi", 2)), peer);
///     std::array<std::byte, 1500> buffer;
///     corio::net::datagram got = co_await socket.recv_from(buffer);   // got.size, got.from, got.truncated
///
/// Connected, as Go's net.DialUDP and tokio's UdpSocket::connect make one: send and recv need no
/// address, the kernel drops datagrams from anyone else, and an ICMP error for a datagram sent (port
/// unreachable: nothing listens there) ends a later receive or send with std::errc::connection_refused.
///
///     auto socket = corio::net::udp_socket::bind(corio::net::endpoint::any_v4(0));
///     socket.connect(server);
///     co_await socket.send(request);
///     corio::net::datagram reply = co_await socket.recv(buffer);     // or connection_refused
class udp_socket {
 public:
  udp_socket() noexcept = default;
  /// Moving a socket, even with a receive in flight on it, leaves that receive working on the socket
  /// in its new place: the datagram stash it keeps into is not in the object (see below).
  udp_socket(udp_socket&& other) noexcept = default;
  /// Closes this one first, then takes `other`'s.
  udp_socket& operator=(udp_socket&& other) noexcept {
    if (this != &other) {
      close();
      socket_ = std::move(other.socket_);
      kept_ = std::move(other.kept_);
    }
    return *this;
  }

  /// Creates a socket of `local`'s family bound to it (port 0: an ephemeral port). Throws
  /// std::system_error naming "corio::net::udp_socket::bind", or stores the error.
  static udp_socket bind(const endpoint& local);
  static udp_socket bind(const endpoint& local, std::error_code& error) noexcept;

  /// Sends one datagram to `to`; yields the bytes sent.
  detail::send_to_awaiter send_to(std::span<const std::byte> data, const endpoint& to) noexcept {
    return {corio::detail::io_kind::sendmsg, socket_.id(), data.data(), data.size(), &to, send_to_name, nullptr};
  }
  detail::send_to_awaiter send_to(std::span<const std::byte> data, const endpoint& to, std::error_code& error) noexcept {
    return {corio::detail::io_kind::sendmsg, socket_.id(), data.data(), data.size(), &to, send_to_name, &error};
  }

  /// Receives one datagram into `buffer`. The rest of a longer one is dropped, as recvfrom does, and
  /// the datagram it yields says so with `truncated`; that is not an error.
  detail::recv_from_awaiter recv_from(std::span<std::byte> buffer) noexcept {
    return {socket_.id(), buffer, kept_, recv_from_name, nullptr};
  }
  detail::recv_from_awaiter recv_from(std::span<std::byte> buffer, std::error_code& error) noexcept {
    return {socket_.id(), buffer, kept_, recv_from_name, &error};
  }

  /// Makes `peer` the socket's default destination and its only source: from then on the kernel drops
  /// datagrams from other addresses (those already queued, or kept by a cancelled receive, are still
  /// delivered). Returns at once: nothing is sent, so a peer that is not there shows only later, as
  /// connection_refused from a send or receive. Connecting again changes the peer. Throws
  /// std::system_error naming "corio::net::udp_socket::connect" and the peer, or stores the error.
  void connect(const endpoint& peer);
  void connect(const endpoint& peer, std::error_code& error) noexcept;

  /// Sends one datagram to the connected peer; yields the bytes sent. Without a peer it fails with
  /// std::errc::destination_address_required.
  detail::send_to_awaiter send(std::span<const std::byte> data) noexcept {
    return {corio::detail::io_kind::sendmsg, socket_.id(), data.data(), data.size(), nullptr, send_name, nullptr};
  }
  detail::send_to_awaiter send(std::span<const std::byte> data, std::error_code& error) noexcept {
    return {corio::detail::io_kind::sendmsg, socket_.id(), data.data(), data.size(), nullptr, send_name, &error};
  }

  /// Receives one datagram from the connected peer, as recv_from does (its `from` is the peer).
  detail::recv_from_awaiter recv(std::span<std::byte> buffer) noexcept {
    return {socket_.id(), buffer, kept_, recv_name, nullptr};
  }
  detail::recv_from_awaiter recv(std::span<std::byte> buffer, std::error_code& error) noexcept {
    return {socket_.id(), buffer, kept_, recv_name, &error};
  }

  endpoint local_endpoint() const;
  endpoint local_endpoint(std::error_code& error) const noexcept;
  /// The connected peer; std::errc::not_connected before connect.
  endpoint peer_endpoint() const;
  endpoint peer_endpoint(std::error_code& error) const noexcept;
  bool is_open() const noexcept { return socket_.is_open(); }
  int native_handle() const noexcept { return socket_.get(); }
  void close() noexcept {
    socket_.reset();
    if (kept_ != nullptr) {
      kept_->close();
    }
  }

 private:
  static constexpr const char* send_to_name = "corio::net::udp_socket::send_to";
  static constexpr const char* recv_from_name = "corio::net::udp_socket::recv_from";
  static constexpr const char* send_name = "corio::net::udp_socket::send";
  static constexpr const char* recv_name = "corio::net::udp_socket::recv";
  // Datagrams received for cancelled receives, for the next ones: one allocation, shared with the
  // receives made from the socket, so that a receive in flight keeps into it wherever the socket has
  // moved, and finds it allocated after the socket is gone (null: no socket). Declared first,
  // destroyed last: after the socket's close, which waits for a receive keeping a datagram here on
  // another thread (keep_while_open).
  std::shared_ptr<corio::detail::datagram_stash> kept_;
  corio::detail::socket_fd socket_;
};

}  // namespace corio::net
