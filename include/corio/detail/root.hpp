#pragma once
// A spawned task's root record: what its executor (registry, shutdown) and its join_handle share.
//
// Design note.
// Shape: spawning does not wrap the task in another coroutine. The task's own frame is the root; its
//   promise points at a pooled `join_state<T>` record holding the registry links, the join protocol,
//   the stop state and, once the task finished, its outcome. At final suspension the task moves its
//   outcome into the record and destroys its own frame (promise_base.hpp calls finish_spawned), so a
//   spawn costs one frame and one record. (A first version awaited the task from a separate root
//   coroutine: one more frame, one more resume per completion, ~40% more memory per live task.)
// Ownership: the frame belongs to the executor that adopted it (registered in its registry until it
//   finishes, so a shutdown can find and destroy it). The record is counted in `refs` by the root side
//   and the join_handle; the last of the two frees it. A shutdown destroys an unfinished frame,
//   records corio::cancelled as the outcome and drops the root side's reference.
// Join protocol (one atomic `phase`; the joiner is at most one coroutine, the awaiter of the handle):
//   running --joiner starts--> registering --joiner armed--> joiner_waiting --task ends--> waking
//           --joiner scheduled--> finished
//   running --task ends--> finished                       (a later joiner does not suspend)
//   registering --task ends--> finished                   (the joiner sees it and does not suspend)
//   registering --joiner's stop--> registering_cancelled  (the joiner sees it and does not suspend)
//   joiner_waiting --joiner's stop, or its frame destroyed--> running   (it unregistered itself)
//   `registering` covers the joiner's set-up (storing itself, registering its stop callback): nobody
//   resumes it then, so the joiner may still touch its frame; after its CAS to joiner_waiting it
//   touches nothing, since the ending side or a canceller may resume it at once on another thread.
//   "Task ends" is finish_spawned or, at shutdown, destroy_frame: both go through end_join(), so a
//   waiting joiner is woken on every path (with corio::cancelled when the frame was destroyed).
//   `waking` covers the ending side's call into the joiner's executor: a joiner frame destroyed
//   meanwhile (its loop is being destroyed) waits in its awaiter's destructor until `finished`, so
//   that executor and frame stay valid during the call. A cancelled joiner stops waiting at once (it
//   leaves the task running, asked to stop), so with_timeout around a join returns at its deadline.
//   CAS operations are acq_rel: the joiner's fields are published by its CAS to joiner_waiting, the
//   task's outcome by the ending side's CAS out of it.
// Detach versus finish: `detached` and `phase` are a store-buffering pair (each side writes one and
//   reads the other), so all four accesses are seq_cst: at least one side sees the other and reports
//   an escaped exception; `failure_reported` makes it exactly one. The finishing side reports through
//   its executor; a handle detached later reports through `sink_`, the executor's unhandled-exception
//   sink that the finishing side kept (shared, so it is valid even after that executor is gone).
// Cancellation: `stop` (stop_state.hpp, inside the record: no allocation) is what every task in the
//   chain observes (their promise's `stop_` points at it). join_handle::cancel() and shutdown request
//   it; it is thread-safe. A root nothing can cancel (event_loop::spawn: no handle escapes, and the
//   loop destroys frames directly) leaves `stop_` null: no state to check at each yield, no callback
//   to register at each suspension.
// Teardown order: `seq_` numbers roots in spawn order; an executor destroys the newest first, so a
//   child parked on a primitive that lives in its parent's frame goes before that parent.
#include <atomic>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <memory>
#include <new>
#include <utility>

#include <corio/detail/executor.hpp>
#include <corio/detail/frame_pool.hpp>
#include <corio/detail/promise_base.hpp>
#include <corio/detail/result_slot.hpp>
#include <corio/detail/stop_state.hpp>
#include <corio/errors.hpp>
#include <corio/task.hpp>

namespace corio::detail {

enum class join_phase : std::uint8_t { running, registering, registering_cancelled, joiner_waiting, waking, finished };

enum class cancellable : bool { no, yes };

/// The type-erased part of a spawned task's record.
struct root_base {
  /// Moves the finished task's outcome out of `promise` into the record (or, with null, records
  /// corio::cancelled for a task destroyed unfinished). Typed, set by join_state<T>.
  using complete_fn = void (*)(root_base& root, promise_base* promise) noexcept;
  using destroy_fn = void (*)(root_base& root) noexcept;

  root_base(complete_fn complete, destroy_fn destroy) noexcept : complete_(complete), destroy_(destroy) {}
  root_base(const root_base&) = delete;
  root_base& operator=(const root_base&) = delete;

  // Registry side, guarded by the owner's registry.
  executor* owner_ = nullptr;
  root_base* prev_ = nullptr;
  root_base* next_ = nullptr;
  unsigned shard_ = 0;
  std::uint64_t seq_ = 0;         // spawn order, for teardown (newest first)
  std::coroutine_handle<> self_;  // the task's frame, until it finishes or is destroyed

  // Join side.
  std::atomic<int> refs{2};
  std::atomic<join_phase> phase{join_phase::running};
  std::atomic<bool> detached{false};
  std::atomic<bool> failure_reported{false};
  std::coroutine_handle<> joiner;
  executor* joiner_owner = nullptr;
  stop_state stop;  // what the chain's promises point at (if the root can be cancelled)
  // spawn_blocking calls the chain waits for (its awaiters parked in `waiting`): a runtime's shutdown
  // destroys the frames that wait for none before it waits for the blocking pool (scheduler.hpp).
  std::atomic<int> blocking_waits{0};
  std::exception_ptr failure_;  // the exception that escaped the task, kept for reporting
  std::shared_ptr<const failure_sink> sink_;  // set by the finishing side if a handle may report later

  complete_fn complete_;
  destroy_fn destroy_;

  /// Requests cancellation of the whole chain. Thread-safe.
  void request_stop() noexcept { stop.request_stop(); }

  /// Shutdown only: destroys the unfinished frame (and the chain of tasks it awaits), records
  /// corio::cancelled, and drops the root side's reference.
  void destroy_frame() noexcept;

  /// The task ended (finished, or destroyed at shutdown): wakes the joiner, or reports an escaped
  /// exception if the handle was already detached. `owner` is the executor the task ended on.
  void end_join(executor* owner) noexcept;

  void release() noexcept {
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      destroy_(*this);
    }
  }
};

/// A process-wide increasing number for each new root (spawn order, for teardown). Thread-safe.
std::uint64_t next_root_sequence() noexcept;

/// Prints an exception nobody will handle to stderr (the default report). Defined in src/core/root.cpp.
void print_unhandled_exception(std::exception_ptr failure) noexcept;

/// Reports the failure of a task whose handle was dropped, once per record, through `owner` or else
/// the sink the record kept. Defined in src/core/root.cpp.
void report_unjoined_failure(root_base& root, executor* owner) noexcept;

template <class T>
struct join_state : root_base {
  result_slot<T> result;

  join_state() noexcept : root_base(&complete, &destroy) {}

  static join_state* create() { return ::new (allocate_frame(sizeof(join_state))) join_state(); }

 private:
  static void complete(root_base& base, promise_base* promise) noexcept {
    auto& self = static_cast<join_state&>(base);
    if (promise == nullptr) {
      self.result.set_exception(std::make_exception_ptr(cancelled()));
      return;
    }
    self.result = std::move(static_cast<task_promise<T>&>(*promise).result_);
    self.failure_ = self.result.error();
  }

  static void destroy(root_base& base) noexcept {
    auto* self = static_cast<join_state*>(&base);
    self->~join_state();
    deallocate_frame(self, sizeof(join_state));
  }
};

}  // namespace corio::detail
