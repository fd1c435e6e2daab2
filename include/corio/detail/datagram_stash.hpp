#pragma once
// Datagrams a UDP socket's receives took from the kernel for tasks that were being cancelled: the
// socket keeps them, and hands each to a receive already waiting on it, or else to its next
// receive, before that one asks the kernel. That makes recv_from cancel-safe, as a stream's reads
// are (read_stash.hpp): a receive that ends cancelled or timed out consumed nothing, and the
// datagram it took reaches another receiver at once.
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
// Waking a waiting receive (as accept_stash.hpp does for accepts): a datagram kept while other
//   receives on the socket wait in their reactors goes to the oldest of them at once; without this,
//   it waited for the socket's next datagram, and a receiver whose peer sends one request and waits
//   for the answer waited forever. Each receive that goes into its reactor lists itself here (wait(),
//   from arm_cancellation, on the thread that owns the op once it is in flight) and unlists itself
//   when it resumes (stop_waiting(), from check()) or when its frame is destroyed unresumed (an
//   executor's shutdown: the datagram handed to it comes back here, at the front). keep() gives the
//   datagram to the first listed receive (`handed`) and cancels its op with request_io_cancel, as a
//   stop callback would. check() then returns the handed datagram if the op ended cancelled (the
//   hand-off's cancel, or its deadline, or a close: it was received before any of them); if the op
//   got a datagram of its own first, or failed on its own, that is what the receive returns, and
//   the handed datagram is kept again, at the front, which hands it to the next waiter; if its own
//   task is being cancelled too, both are kept. wait() takes a datagram kept between start()'s
//   take() and the listing the same way, so none is left behind by that window. No lost wake-up
//   follows from the cancel: receives wait on a socket non-exclusively, so a datagram that arrived
//   as the hand-off cancelled one of them woke the others too, and with none left it stays queued in
//   the kernel for the next receive.
// Served, then cancelled: a receive served from here may still end cancelled (a stop requested before
//   it resumes, after the budget's yield); its datagram then goes back to the front, as it was served
//   (so a single receiver's order holds; concurrent receivers have none to keep), but cut to that
//   receive's buffer if it was longer.
// Threads and locking: several tasks may receive on one socket at once, on any workers, so one mutex
//   orders the kept list, the waiters' list and every waiter's `handed`; `count_` lets a receive see
//   an empty stash without taking it (relaxed: a datagram kept by another thread just as a receive
//   starts reaches it through wait()). keep() cancels a waiter's op while it holds the mutex, and the
//   waiter unlists under it before its frame can go, so the op it cancels is alive
//   (request_io_cancel takes no lock: a lock-free push and a wake-up).
// Lifetime: shared by the socket and every receive made from it (shared_ptr), so that a receive still
//   listed here when its socket is closed and destroyed (a misuse, which the close ends with
//   operation_canceled) finds it allocated. Closing the socket drops what it kept, and a datagram
//   kept after that is dropped at once (nobody can receive it any more).
#include <sys/socket.h>

#include <atomic>
#include <cstddef>
#include <mutex>
#include <optional>
#include <vector>

#include <corio/detail/intrusive_fifo.hpp>

namespace corio::detail {

struct io_op;
class datagram_stash;

/// A datagram a cancelled receive took: its bytes as received, its sender, whether the kernel cut it.
struct kept_datagram {
  std::vector<std::byte> bytes;
  sockaddr_storage sender{};
  socklen_t sender_length = 0;
  bool truncated = false;  // the kernel had already cut it
};

/// A receive waiting in its reactor, listed in its socket's stash (see "Waking a waiting receive").
/// Lives in the receive's awaiter, which sets `stash` and `op` when it starts; the rest is the stash's,
/// under its mutex.
struct datagram_waiter {
  datagram_stash* stash = nullptr;
  io_op* op = nullptr;
  datagram_waiter* next = nullptr;
  std::optional<kept_datagram> handed;  // a kept datagram keep() gave this receive
  bool listed = false;                  // in the stash's list
  bool registered = false;              // wait() ran and stop_waiting() has not: the owning thread's
};

class datagram_stash {
 public:
  using kept = kept_datagram;

  datagram_stash() noexcept = default;
  datagram_stash(const datagram_stash&) = delete;
  datagram_stash& operator=(const datagram_stash&) = delete;
  ~datagram_stash() = default;

  bool empty() const noexcept { return count_.load(std::memory_order_relaxed) == 0; }

  /// The oldest kept datagram, or nothing.
  std::optional<kept> take();
  /// Gives a datagram to the oldest receive waiting (waking it), else keeps it: after those kept
  /// already, or before them (`oldest`: it was taken from here, or handed out). Dropped once the
  /// socket is closed. Throws std::bad_alloc.
  void keep(kept datagram, bool oldest);
  /// The op `waiter.op`, now in flight, waits for a datagram: lists it, or, if one is kept, hands
  /// it that one and cancels the op at once.
  void wait(datagram_waiter& waiter) noexcept;
  /// The waiting receive resumed or goes: unlists it and returns the datagram handed to it, if any.
  /// Does nothing unless wait() ran since the last call.
  std::optional<kept> stop_waiting(datagram_waiter& waiter) noexcept;
  /// The socket closes: drops what it kept, and whatever is kept later. Thread-safe, like the rest
  /// (a receive on another thread may be taking or keeping one meanwhile).
  void close() noexcept;

 private:
  /// Under the mutex: hands `datagram` to `waiter` and cancels its op.
  static void hand(datagram_waiter& waiter, kept&& datagram) noexcept;
  /// Under the mutex: removes and returns the oldest kept datagram (there is one).
  kept take_oldest() noexcept;

  std::mutex mutex_;
  std::vector<kept> kept_;  // oldest first
  intrusive_fifo<datagram_waiter> waiting_;  // listed receives, oldest first
  bool closed_ = false;
  std::atomic<std::size_t> count_{0};  // kept_.size(), readable without the lock (a hint, see above)
};

}  // namespace corio::detail
