#pragma once
// What the socket types of corio/net share: an owned descriptor and the awaiters of the plain
// byte-stream and accept operations (built on io_awaiter, detail/io_op.hpp).
#include <sys/socket.h>

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <system_error>
#include <utility>

#include <corio/detail/accept_stash.hpp>
#include <corio/detail/io_op.hpp>
#include <corio/detail/io_source.hpp>

namespace corio::detail {

/// Closes a socket that corio's reactors may have registered, so that an epoll reactor notices when
/// the descriptor number is reused (src/io/epoll_reactor.cpp). Every corio socket closes through this.
void close_socket(int fd) noexcept;

/// Creates a non-blocking, close-on-exec socket; returns it or -errno.
int open_socket(int family, int type) noexcept;

/// The open socket `fd` as its operations name it (socket_id).
socket_id identify_socket(int fd) noexcept;

/// Owns one socket descriptor; closes it on destruction. Move-only. Closing while an operation on the
/// socket is in flight is a misuse (cancel the operation first), which corio catches where it can
/// (README, Limitations): the descriptor is an atomic, so that such a close on another thread is not
/// also a data race on it with the operation that read it.
class socket_fd {
 public:
  socket_fd() noexcept = default;
  explicit socket_fd(int fd) noexcept : fd_(fd) { remember(identify_socket(fd)); }
  socket_fd(socket_fd&& other) noexcept : fd_(other.release()) { remember(other.id()); }
  socket_fd& operator=(socket_fd&& other) noexcept {
    if (this != &other) {
      socket_id taken = other.id();
      close_socket(fd_.exchange(other.release(), std::memory_order_relaxed));
      remember(taken);
    }
    return *this;
  }
  ~socket_fd() { close_socket(get()); }

  int get() const noexcept { return fd_.load(std::memory_order_relaxed); }
  /// What the socket's operations carry (io_op.hpp).
  socket_id id() const noexcept {
    return {get(), generation_.load(std::memory_order_relaxed), record_.load(std::memory_order_relaxed)};
  }
  bool is_open() const noexcept { return get() >= 0; }
  int release() noexcept { return fd_.exchange(-1, std::memory_order_relaxed); }
  void reset(int fd = -1) noexcept {
    if (fd >= 0) {
      remember(identify_socket(fd));
    }
    close_socket(fd_.exchange(fd, std::memory_order_relaxed));
  }

 private:
  void remember(socket_id socket) noexcept {
    generation_.store(socket.generation, std::memory_order_relaxed);
    record_.store(socket.record, std::memory_order_relaxed);
  }

  std::atomic<int> fd_{-1};
  std::atomic<std::uint32_t> generation_{0};  // atomic for the same reason as fd_
  std::atomic<fd_record*> record_{nullptr};    // likewise
};

/// recv or send on a connected socket; yields the byte count (0 from recv: the peer closed). A recv
/// given the stream's `source` goes through its registered file, or is served by its multishot recv
/// (CORIO_URING_MULTISHOT=all, io_source.hpp); a send given it goes through the registered file too.
/// A recv given the stream's `stash` takes kept bytes from it first, without a system call, and keeps
/// there what it reads for a task being cancelled (read_stash.hpp); a recv into an empty buffer
/// yields 0 at once. It holds its direction's flag on the stream while it is in flight
/// (exclusive_claim).
class transfer_awaiter : public io_awaiter {
 public:
  transfer_awaiter(io_kind kind, socket_id socket, const void* data, std::size_t size, const char* what,
                   std::error_code* error, std::atomic<io_source*>* source = nullptr,
                   read_stash* stash = nullptr) noexcept
      : io_awaiter(what, error) {
    op_.kind = kind;
    target(socket);
    op_.source = source;
    op_.buffer = const_cast<void*>(data);  // send only reads it
    op_.length = clamp_transfer(size);
    keep_when_cancelled(stash);
  }

  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> self) {
    return start_claimed(self);
  }
  std::size_t await_resume() { return check_claimed() ? static_cast<std::size_t>(op_.result) : 0; }
};

/// send of all of `data` on a connected socket (a whole transfer, io_op.hpp): the reactor issues as
/// many sends as it takes and the task resumes once. Yields the bytes sent: all of them, or, in the
/// error_code form after an error, how many went out before it. Stopped part-way by a cancellation,
/// it throws corio::cancelled (or stores errc::operation_canceled).
class send_all_awaiter : public io_awaiter {
 public:
  send_all_awaiter(socket_id socket, const void* data, std::size_t size, const char* what, std::error_code* error,
                   std::atomic<io_source*>* source = nullptr) noexcept
      : io_awaiter(what, error) {
    op_.kind = io_kind::send;
    target(socket);
    op_.source = source;
    op_.buffer = const_cast<void*>(data);  // send only reads it
    op_.length = clamp_transfer(size);
    op_.whole_size = size;
  }

  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> self) {
    if (op_.whole_size == 0) {
      return finish_at_once(self);  // nothing to send: result 0
    }
    return start_claimed(self);
  }
  std::size_t await_resume();
};

/// accept on a listening socket; yields the new descriptor (-1 on error) and fills in the peer address
/// (left empty when the listener's multishot accept, given as `source`, served it, or when `stash`
/// did). Given the listener's `stash`, it takes a connection kept there first, is woken for one kept
/// while it waits, and keeps there the one it completes with for a task being cancelled
/// (accept_stash.hpp).
class accept_fd_awaiter : public io_awaiter {
 public:
  accept_fd_awaiter(socket_id socket, const char* what, std::error_code* error,
                    std::atomic<io_source*>* source = nullptr, std::shared_ptr<accept_stash> stash = nullptr) noexcept
      : io_awaiter(what, error), stash_(std::move(stash)) {
    op_.kind = io_kind::accept;
    target(socket);
    op_.source = source;
  }
  accept_fd_awaiter(accept_fd_awaiter&& other) noexcept = default;
  /// A frame destroyed while this accept waited (its executor's shutdown): unlists it from the stash
  /// and leaves there a connection handed to it, and the one its op completed with that it never
  /// resumed to take (the kernel accepted it as the executor shut down), so the listener's next
  /// accept gets both; with no stash, or the listener closed, they are closed.
  ~accept_fd_awaiter();

  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> self) {
    address_length_ = sizeof(address_);
    op_.buffer = &address_;
    op_.address_length = &address_length_;
    if (stash_ != nullptr) {
      keep_when_cancelled(*stash_, waiter_);
    }
    return start(self);
  }
  int await_resume() {
    resumed_ = true;  // what the op completed with is check()'s from here (returned, or kept in the stash)
    return check() ? op_.result : -1;
  }

 protected:
  sockaddr_storage address_{};
  socklen_t address_length_ = 0;

 private:
  std::shared_ptr<accept_stash> stash_;  // shared with the listener: an accept may outlive it
  accept_waiter waiter_;
  bool resumed_ = false;
};

}  // namespace corio::detail
