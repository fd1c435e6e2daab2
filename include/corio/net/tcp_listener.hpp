#pragma once
// corio::net::tcp_listener: a listening TCP socket whose accept suspends the awaiting task.
#include <atomic>
#include <coroutine>
#include <memory>
#include <system_error>
#include <utility>

#include <corio/detail/accept_stash.hpp>
#include <corio/detail/socket.hpp>
#include <corio/net/endpoint.hpp>
#include <corio/net/tcp_stream.hpp>

namespace corio::net {

/// Socket options for tcp_listener::bind.
struct listen_options {
  /// SO_REUSEADDR: rebind a port whose old connections are still in TIME_WAIT.
  bool reuse_address = true;
  /// SO_REUSEPORT: several listeners (one per worker, say) share the port; the kernel spreads
  /// incoming connections over them.
  bool reuse_port = false;
  int backlog = 1024;
};

namespace detail {

class accept_awaiter : public corio::detail::accept_fd_awaiter {
 public:
  using accept_fd_awaiter::accept_fd_awaiter;
  tcp_stream await_resume() {
    int fd = accept_fd_awaiter::await_resume();
    return fd >= 0 ? tcp_stream(fd) : tcp_stream();
  }
};

}  // namespace detail

/// A listening TCP socket. Move-only; closes on destruction. accept() is an awaitable with the same
/// error, cancellation and resumption rules as tcp_stream's operations; several tasks may accept on one
/// listener at once (each connection goes to one of them). Errors such as EMFILE (out of descriptors)
/// are reported by that accept only: the listener stays usable. Closing the listener on its thread ends
/// the accepts waiting on it with std::errc::operation_canceled. An accept is cancel-safe: a connection
/// it took for a task being cancelled (a when_any branch that lost in the same turn) stays with the
/// listener: an accept waiting on it gets it at once, else its next accept returns it first (closing
/// the listener closes it). Destroying the listener while accepts wait ends them cancelled, as
/// closing it does. On io_uring one
/// multishot accept serves every accept; connections that arrive with no accept waiting are queued (up
/// to 64, then the kernel's backlog holds the rest). Its state lives in the reactor of the thread that
/// accepted first; on a runtime of several workers, an accept from a task on another worker is handed
/// to that worker, and the task resumes there. An accept from another event loop or runtime while that
/// state lives fails with corio::net::errc::served_by_another_reactor (the multishot accept there would
/// take its connections).
///
///     auto listener = corio::net::tcp_listener::bind(corio::net::endpoint::loopback_v4(0));
///     auto port = listener.local_endpoint().port();              // the ephemeral port chosen
///     corio::net::tcp_stream client = co_await listener.accept();
class tcp_listener {
 public:
  tcp_listener() noexcept = default;
  tcp_listener(tcp_listener&& other) noexcept = default;
  /// close(): the accepts still waiting must see their stash closed before the number is, or one of
  /// them would look for a connection left behind on whatever socket reuses the number.
  ~tcp_listener() { close(); }
  /// Closes this one first (its multishot state before its socket), then takes `other`'s.
  tcp_listener& operator=(tcp_listener&& other) noexcept {
    if (this != &other) {
      close();
      socket_ = std::move(other.socket_);
      source_ = std::move(other.source_);
      stash_ = std::move(other.stash_);
    }
    return *this;
  }

  /// Creates, configures, binds and listens (synchronous). Throws std::system_error naming
  /// "corio::net::tcp_listener::bind", or stores the error and returns a closed listener.
  static tcp_listener bind(const endpoint& local, listen_options options = {});
  static tcp_listener bind(const endpoint& local, listen_options options, std::error_code& error) noexcept;

  /// Waits for the next connection; yields it as a connected stream (closed, on error, in the
  /// error_code form).
  detail::accept_awaiter accept() noexcept {
    return {socket_.id(), accept_name, nullptr, source(), stash_};
  }
  detail::accept_awaiter accept(std::error_code& error) noexcept {
    return {socket_.id(), accept_name, &error, source(), stash_};
  }

  endpoint local_endpoint() const;
  endpoint local_endpoint(std::error_code& error) const noexcept;
  bool is_open() const noexcept { return socket_.is_open(); }
  int native_handle() const noexcept { return socket_.get(); }
  void close() noexcept {
    if (source_ != nullptr) {
      source_->close();  // the state stays allocated until the object goes: detail/io_source.hpp, "Lifetime"
    }
    if (stash_ != nullptr) {
      stash_->close_all();  // stays allocated too, shared with the accepts made from this listener
    }
    socket_.reset();
  }

 private:
  static constexpr const char* accept_name = "corio::net::tcp_listener::accept";
  std::atomic<corio::detail::io_source*>* source() noexcept { return source_ != nullptr ? source_->slot() : nullptr; }

  corio::detail::socket_fd socket_;
  // io_uring: the multishot accept's state; released first. Like the stash, in an allocation of its
  // own, not in the object: an accept waiting when the listener is moved (re-issued on io_uring when
  // the multishot accept ends) still finds it. Null: no socket.
  std::unique_ptr<corio::detail::io_source_ref> source_;
  std::shared_ptr<corio::detail::accept_stash> stash_;  // connections cancelled accepts took (accept_stash.hpp)
};

}  // namespace corio::net
