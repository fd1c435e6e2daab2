#pragma once
// Connections a listener's accepts took for tasks that were being cancelled: the listener keeps them,
// and its next accept returns them first. That makes an accept cancel-safe: one that ends cancelled
// took nothing, so `when_any(listener.accept(), shutdown.wait())` loses no connection.
//
// Design note.
// Why: an accept can complete with a connection at the moment its task is cancelled. A when_any
//   whose other branch completes in the same reap is the usual case: both branches are scheduled
//   before either runs, the winner cancels the loser, and the loser resumes holding a descriptor.
//   Before this, the loser's stream was dropped with the branch, which closed the connection under
//   its client. tokio's accepts are readiness-based and never take a connection they do not return;
//   this gives corio's the same guarantee (the bytes of a cancelled read get it from read_stash.hpp).
// Who: io_awaiter::check() keeps the descriptor of an accept that completed while its task's stop was
//   requested, and reports the cancellation. An accept's own deadline (with_timeout around the
//   accept) does not stash: the accept returns the connection it took, since its task goes on. The
//   next accept on the listener, from any task, takes a kept connection before it asks its reactor,
//   and an accept already waiting is woken for it (below).
// Threads: any. Several tasks may accept on one listener at once, on several workers, so keep and
//   take lock a mutex. `count_` lets an accept skip the lock when nothing is kept: it is a hint
//   (relaxed), since an accept that misses a connection kept at the same instant is no different
//   from one that started a moment before that connection arrived; the mutex orders the real state.
// Waking a waiting accept: a connection kept while other accepts on the listener wait goes to the
//   oldest of them at once. Each accept that goes into its reactor to wait lists itself here
//   (wait(), from arm_cancellation, on the thread that owns the op once it is in flight) and
//   unlists itself when it resumes (stop_waiting(), from check()) or when its frame is destroyed
//   unresumed (an executor's shutdown). keep() hands the connection to the first listed accept
//   (`handed`) and cancels its op with request_io_cancel, as a stop callback would; the op ends
//   -ECANCELED (or with a connection of its own, if the kernel gave it one first) and check() returns
//   the handed connection, or keeps it again if its own task is being cancelled too, or if it got
//   one of its own (which then wakes the next waiter). wait() takes a connection kept between
//   start()'s take() and the listing the same way, so none is left behind by that window.
// Lost wake-ups: an accept request in the kernel waits on the listener exclusively, so a connection
//   wakes one request only. On a ring with deferred task running (a runtime's worker), a request
//   cancelled after its wake-up but before its deferred work ran ends -ECANCELED and leaves the
//   connection in the backlog, with the other accepts still asleep (a two-worker test of single-shot
//   accepts hung on it). So an accept that ends -ECANCELED while others are listed here accepts once
//   without blocking (take_pending) and treats what it gets as its own completion. It does so under
//   the mutex and only while the listener is open: the listener's close() closes the stash before the
//   socket, so the descriptor cannot name another socket meanwhile. With nobody else waiting it does
//   not look: the connection waits in the backlog for the next accept, which finds it at once, and
//   a listener shared with other processes keeps its connections for them.
// Lifetime: shared by the listener and every accept made from it (shared_ptr), so that an accept
//   still listed here, or one that resumes after the listener was closed and destroyed, finds it
//   allocated. Closing the listener closes the kept connections, and a connection kept after that is
//   closed at once (nobody can accept it any more); its waiting accepts end cancelled by the close
//   itself.
// Locking: one mutex orders kept_, the list and every waiter's `handed`. keep() cancels a waiter's op
//   while it holds the mutex, and the waiter unlists under it before its frame can go, so the op it
//   cancels is alive (request_io_cancel on an op that already finished touches only its state).
//   request_io_cancel takes no lock (a lock-free push and a wake-up), so nothing waits on this mutex
//   while holding another. Descriptors are closed outside it.
#include <atomic>
#include <cstddef>
#include <mutex>
#include <vector>

#include <corio/detail/intrusive_fifo.hpp>

namespace corio::detail {

struct io_op;
class accept_stash;

/// An accept waiting in its reactor, listed in its listener's stash (see "Waking a waiting accept").
/// Lives in the accept's awaiter, which sets `stash` and `op` when it starts; `next`, `listed` and
/// `handed` are the stash's, under its mutex.
struct accept_waiter {
  accept_stash* stash = nullptr;
  io_op* op = nullptr;
  accept_waiter* next = nullptr;
  int handed = -1;          // a kept connection keep() gave this accept
  bool listed = false;      // in the stash's list
  bool registered = false;  // wait() ran and stop_waiting() has not: the owning thread's
};

class accept_stash {
 public:
  accept_stash() = default;
  accept_stash(const accept_stash&) = delete;
  accept_stash& operator=(const accept_stash&) = delete;
  ~accept_stash() { close_all(); }

  /// The oldest kept connection's descriptor, or -1 if none is kept.
  int take() noexcept;
  /// Gives `fd` to the oldest accept waiting (waking it), else keeps it for the listener's next
  /// accept; closes it if the listener was closed.
  void keep(int fd) noexcept;
  /// The op `waiter.op`, now in flight, waits for a connection: lists it, or, if a connection is
  /// kept, hands it that one and cancels the op at once.
  void wait(accept_waiter& waiter) noexcept;
  /// An accept on `listener` ended cancelled while others wait: accepts a connection the kernel may
  /// have left in the backlog for it (see "Lost wake-ups"), or returns -1.
  int take_pending(int listener) noexcept;
  /// The waiting accept resumed or goes: unlists it and returns the connection handed to it, or -1.
  /// Does nothing (-1) unless wait() ran since the last call.
  int stop_waiting(accept_waiter& waiter) noexcept;
  /// The listener closes: closes every kept connection and every one kept later.
  void close_all() noexcept;

 private:
  std::mutex mutex_;
  /// Under the mutex: hands `fd` to `waiter` and cancels its op.
  static void hand(accept_waiter& waiter, int fd) noexcept;
  /// Under the mutex: removes and returns the oldest kept connection (there is one).
  int take_oldest() noexcept;

  std::vector<int> kept_;  // oldest first (a handful at most: a deque would allocate when made)
  intrusive_fifo<accept_waiter> waiting_;  // listed accepts, oldest first
  bool closed_ = false;
  std::atomic<std::size_t> count_{0};  // kept_.size(), readable without the lock (a hint, see above)
};

}  // namespace corio::detail
