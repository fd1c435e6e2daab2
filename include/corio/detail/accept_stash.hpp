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
//   next accept on the listener, from any task, takes a kept connection before it asks its reactor.
// Threads: any. Several tasks may accept on one listener at once, on several workers, so keep and
//   take lock a mutex. `count_` lets an accept skip the lock when nothing is kept: it is a hint
//   (relaxed), since an accept that misses a connection kept at the same instant is no different
//   from one that started a moment before that connection arrived; the mutex orders the real state.
// Liveness: a kept connection waits for the listener's next accept call. An accept already waiting
//   in the reactor is not woken by it (it waits for the kernel's next connection), so with several
//   accept tasks, a connection kept by one that was cancelled waits until one of the others accepts
//   again (README, Cancellation).
// Lifetime: the listener owns it on the heap, so that an accept in flight keeps a valid pointer when
//   the listener object is moved. Closing the listener closes the kept connections, and a connection
//   kept after that is closed at once (nobody can accept it any more).
#include <atomic>
#include <cstddef>
#include <mutex>
#include <vector>

namespace corio::detail {

class accept_stash {
 public:
  accept_stash() = default;
  accept_stash(const accept_stash&) = delete;
  accept_stash& operator=(const accept_stash&) = delete;
  ~accept_stash() { close_all(); }

  /// The oldest kept connection's descriptor, or -1 if none is kept.
  int take() noexcept;
  /// Keeps `fd` for the listener's next accept; closes it if the listener was closed.
  void keep(int fd) noexcept;
  /// The listener closes: closes every kept connection and every one kept later.
  void close_all() noexcept;

 private:
  std::mutex mutex_;
  std::vector<int> kept_;  // oldest first (a handful at most: a deque would allocate when made)
  bool closed_ = false;
  std::atomic<std::size_t> count_{0};  // kept_.size(), readable without the lock (a hint, see above)
};

}  // namespace corio::detail
