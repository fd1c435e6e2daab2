#pragma once
// Datagrams a UDP socket's receives took from the kernel for tasks that were being cancelled: the
// socket keeps them, and its next recv_from returns one before it asks the kernel. That makes
// recv_from cancel-safe, as a stream's reads are (read_stash.hpp): a receive that ends cancelled or
// timed out consumed nothing.
//
// Design note.
// Why: a completion-based receive (io_uring) can complete with a datagram after its task was asked
//   to stop, or in the same reap as the when_any branch that beat it. The datagram is in user memory
//   by then and cannot go back into the socket; dropped, it was lost to every other receiver.
// Who: io_awaiter::check() keeps the datagram of a receive that completed while a stop was requested
//   (its bytes as received, its sender, whether it was cut), and reports the cancellation or timeout
//   instead; a receive past its own deadline that got a datagram returns it. io_awaiter::start()
//   serves a receive from here, oldest first, without a system call, cutting a kept datagram to the
//   new buffer as recvmsg would (and saying so with MSG_TRUNC).
// Threads: several tasks may receive on one socket at once, on any workers, so the list is guarded by
//   a mutex; `count_` lets a receive see an empty stash without taking it (relaxed: a datagram kept
//   by another thread just as a receive starts may wait for the next receive, as a datagram arriving
//   just after a receive went to the kernel waits for the next one).
// Served, then cancelled: a receive served from here may still end cancelled (a stop requested before
//   it resumes, after the budget's yield); its datagram then goes back to the front, as it was served
//   (so a single receiver's order holds; concurrent receivers have none to keep), but cut to that
//   receive's buffer if it was longer.
// Limits: a receive already waiting in the kernel is not woken for a kept datagram; the socket's next
//   receive takes it. Moving the stash (with its socket) is done with no receive in flight, as for
//   every socket move; closing the socket clears it under the mutex.
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <mutex>
#include <optional>
#include <span>
#include <utility>
#include <vector>

namespace corio::detail {

class datagram_stash {
 public:
  struct kept {
    std::vector<std::byte> bytes;
    sockaddr_storage sender{};
    socklen_t sender_length = 0;
    bool truncated = false;  // the kernel had already cut it
  };

  /// Not movable: receives in flight point at it (udp_socket keeps it in an allocation of its own).
  datagram_stash() noexcept = default;
  datagram_stash(const datagram_stash&) = delete;
  datagram_stash& operator=(const datagram_stash&) = delete;
  ~datagram_stash() = default;

  bool empty() const noexcept { return count_.load(std::memory_order_relaxed) == 0; }

  /// The oldest kept datagram, or nothing.
  std::optional<kept> take() {
    std::lock_guard guard(mutex_);
    if (kept_.empty()) {
      return std::nullopt;
    }
    kept oldest = std::move(kept_.front());
    kept_.erase(kept_.begin());
    count_.store(kept_.size(), std::memory_order_relaxed);
    return oldest;
  }

  /// Keeps a datagram: after those kept already, or before them (`oldest`: it was taken from here).
  /// Throws std::bad_alloc.
  void keep(kept datagram, bool oldest) {
    std::lock_guard guard(mutex_);
    kept_.insert(oldest ? kept_.begin() : kept_.end(), std::move(datagram));
    count_.store(kept_.size(), std::memory_order_relaxed);
  }

  /// The socket closes: drops what it kept. Thread-safe, like the rest (a receive on another
  /// thread may be taking or keeping one meanwhile).
  void clear() noexcept {
    std::vector<kept> dropped;
    std::lock_guard guard(mutex_);
    dropped.swap(kept_);
    count_.store(0, std::memory_order_relaxed);
  }

 private:
  std::mutex mutex_;
  std::vector<kept> kept_;
  std::atomic<std::size_t> count_{0};
};

}  // namespace corio::detail
