#pragma once
// The one interface through which everything that suspends a coroutine gets it resumed again.
//
// An executor owns coroutines and resumes them from its run queue: an event_loop, or a runtime (whose
// workers share one executor identity, since tasks migrate between them). An awaitable that parks a
// coroutine records current_owner() at suspension (the executor, or the sync_wait blocking a plain
// thread); whoever completes the wait later, on any thread, hands it to that owner (try_schedule).
// Nothing else resumes a parked coroutine, but its waker when it has no owner (a coroutine resumed
// by hand on a plain thread) or its owner refuses (such a coroutine that parked during a sync_wait
// and is woken after it).
// Threads: schedule() is thread-safe. `current_executor` is per thread. Timers are not the executor's
// business: each loop and worker thread owns its own (detail/timer_queue.hpp, current_timers).
#include <coroutine>
#include <exception>
#include <functional>
#include <memory>
#include <span>

namespace corio::detail {

struct root_base;

/// Where an exception goes that escaped a task nobody will join.
using failure_sink = std::function<void(std::exception_ptr)>;

class executor {
 public:
  /// Thread-safe. Makes `handle` runnable on this executor; never resumes it inline. Called from the
  /// executor's own thread it is a local push; from elsewhere, a lock-free post or an injection.
  /// After shutdown the handle is dropped: its frame is destroyed by the shutdown itself.
  virtual void schedule(std::coroutine_handle<> handle) noexcept = 0;

  /// Thread-safe. schedule(), unless this executor cannot take the handle now (a plain thread no
  /// longer blocked in sync_wait: sync_wait.hpp): then false, and the caller resumes it inline, as
  /// it would a coroutine with no owner.
  virtual bool try_schedule(std::coroutine_handle<> handle) noexcept {
    schedule(handle);
    return true;
  }

  /// Thread-safe. Makes every handle in `handles` runnable, in order, as if each went through
  /// schedule(), but as one batch: an executor may queue them with one operation and one wake-up (a
  /// reactor reaping N completions at once). Unlike schedule() from the executor's own thread, a batch
  /// goes to the back of the queue, not the LIFO slot. The default calls schedule() for each.
  virtual void schedule_batch(std::span<const std::coroutine_handle<>> handles) noexcept {
    for (std::coroutine_handle<> handle : handles) {
      schedule(handle);
    }
  }

  /// Executor thread only: requeues the running coroutine behind everything already runnable.
  virtual void yield_current(std::coroutine_handle<> handle) = 0;

  /// Executor thread only: requeues a coroutine that spent its cooperative budget (coop_budget.hpp).
  /// Unlike yield_current, an executor may run it sooner than the back of its queue, as long as it
  /// still bounds how long the rest wait (a runtime worker runs it right behind the task it just woke,
  /// within a time-bounded chain). The default is yield_current.
  virtual void yield_for_budget(std::coroutine_handle<> handle) { yield_current(handle); }

  /// Registers a new root and queues it to start. Throws corio::loop_stopped (or
  /// corio::runtime_stopped) if the executor no longer accepts work; the root is then not registered.
  virtual void adopt(root_base& root) = 0;

  /// Thread-safe. Unregisters a root that finished.
  virtual void forget(root_base& root) noexcept = 0;

  /// Thread-safe. Registers a root that moves here from another executor (schedule_on), without
  /// queuing it. Returns false if this executor no longer accepts work.
  virtual bool attach(root_base& root) noexcept = 0;

  /// Thread-safe. An exception escaped a task nobody will join.
  virtual void report_unhandled(std::exception_ptr failure) noexcept = 0;

  /// Thread-safe. The sink report_unhandled feeds, shared so that a record can report through it
  /// after this executor is gone (a join_handle detached late).
  virtual std::shared_ptr<const failure_sink> unhandled_sink() const noexcept = 0;

 protected:
  ~executor() = default;
};

/// The executor whose thread runs the calling code, or null on a plain thread.
extern thread_local constinit executor* current_executor;

/// This thread, as the executor of the chains its sync_waits drive, while one blocks here
/// (sync_wait.hpp); null otherwise.
extern thread_local constinit executor* current_sync_wait;

/// Who resumes a coroutine that parks now, on this thread: its executor, else the sync_wait driving
/// it, else nobody (a coroutine the caller resumed by hand: its waker resumes it inline). Everything
/// that parks a coroutine records this, so a chain a plain thread drives never moves to the thread
/// that wakes it.
inline executor* current_owner() noexcept { return current_executor != nullptr ? current_executor : current_sync_wait; }

/// How many executors' shutdowns are destroying frames on this thread (root_registry's teardown).
extern thread_local constinit int frames_in_teardown;

/// Why the calling thread must not block on a coroutine's completion (sync_wait, a channel's blocking
/// forms), or null if it may. On an executor's thread, blocking stalls every task there (and
/// deadlocks a one-worker runtime). Inside a frame a shutdown destroys, it would wait for frames
/// that only this thread, once it returns, can end.
inline const char* blocking_refused_here() noexcept {
  if (current_executor != nullptr) {
    return "on an event loop or runtime worker thread (co_await instead)";
  }
  if (frames_in_teardown != 0) {
    return "while a shutdown destroys frames on this thread (in a destroyed frame's destructor): it would wait "
           "for what only that shutdown can end";
  }
  return nullptr;
}

struct schedule_on_awaiter;

/// A schedule_on hop this thread's running chain asked for and that is not done yet (see
/// resume_top), or null.
extern thread_local constinit schedule_on_awaiter* pending_hop;

/// Completes pending_hop (and any hop a refused one leads to). Defined in src/sched/event_loop.cpp.
void complete_pending_hop() noexcept;

/// Resumes `handle` as the top of its chain: once resume() returns, nothing on this thread touches that
/// chain any more, so this is where a schedule_on hop the chain made gets carried out. (The hop cannot
/// be carried out inside await_suspend: the parents of the hopping coroutine still finish their await
/// handshake on this thread after it suspends, and the target loop could run or destroy the chain.)
/// Every executor's run loop, and every inline resume of a chain suspended on a plain thread, resumes
/// through here; nested starts (a task awaiting its callee, when_all starting operands) do not.
inline void resume_top(std::coroutine_handle<> handle) noexcept {
  handle.resume();
  if (pending_hop != nullptr) [[unlikely]] {
    complete_pending_hop();
  }
}

/// Resumes `handle` through `owner`, or inline when it was suspended with no owner (or its owner is a
/// plain thread no longer in sync_wait).
inline void resume_through(executor* owner, std::coroutine_handle<> handle) {
  if (owner == nullptr || !owner->try_schedule(handle)) {
    resume_top(handle);
  }
}

}  // namespace corio::detail
