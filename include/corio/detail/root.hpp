#pragma once
// A spawned task's root record: what its executor (registry, shutdown) and its join_handle share.
//
// Design note.
// Shape: spawning does not wrap the task in another coroutine. The task's own frame is the root; its
//   promise points at a pooled `join_state<T>` record holding the registry links, the join protocol,
//   the stop source and, once the task finished, its outcome. At final suspension the task moves its
//   outcome into the record and destroys its own frame (promise_base.hpp calls finish_spawned), so a
//   spawn costs one frame and one record. (A first version awaited the task from a separate root
//   coroutine: one more frame, one more resume per completion, ~40% more memory per live task.)
// Ownership: the frame belongs to the executor that adopted it (registered in its registry until it
//   finishes, so a shutdown can find and destroy it). The record is counted in `refs` by the root side
//   and the join_handle; the last of the two frees it. A shutdown destroys an unfinished frame,
//   records corio::cancelled as the outcome and drops the root side's reference.
// Join protocol (one atomic `phase`):
//   running --joiner parks--> joiner_waiting --task finishes--> finished (the task wakes the joiner)
//   running --task finishes--> finished (a later joiner does not suspend)
//   The joiner stores itself before its acq_rel CAS; the finishing side's acq_rel exchange reads it.
// Cancellation: `stop` is the source every task in the chain observes (their promise's `stop_` points
//   at `token`). join_handle::cancel() and shutdown request it; it is thread-safe. A root nothing can
//   cancel (event_loop::spawn: no handle escapes, and the loop destroys frames directly) gets an empty
//   source and a null `stop_`: no control block to allocate, no token to check at each yield.
#include <atomic>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <new>
#include <stop_token>
#include <utility>

#include <corio/detail/executor.hpp>
#include <corio/detail/frame_pool.hpp>
#include <corio/detail/promise_base.hpp>
#include <corio/detail/result_slot.hpp>
#include <corio/errors.hpp>
#include <corio/task.hpp>

namespace corio::detail {

enum class join_phase : std::uint8_t { running, joiner_waiting, finished };

enum class cancellable : bool { no, yes };

/// The type-erased part of a spawned task's record.
struct root_base {
  /// Moves the finished task's outcome out of `promise` into the record (or, with null, records
  /// corio::cancelled for a task destroyed unfinished). Typed, set by join_state<T>.
  using complete_fn = void (*)(root_base& root, promise_base* promise) noexcept;
  using destroy_fn = void (*)(root_base& root) noexcept;

  root_base(cancellable can_cancel, complete_fn complete, destroy_fn destroy) noexcept
      : stop(can_cancel == cancellable::yes ? std::stop_source() : std::stop_source(std::nostopstate)),
        complete_(complete),
        destroy_(destroy) {}
  root_base(const root_base&) = delete;
  root_base& operator=(const root_base&) = delete;

  // Registry side, guarded by the owner's registry.
  executor* owner_ = nullptr;
  root_base* prev_ = nullptr;
  root_base* next_ = nullptr;
  unsigned shard_ = 0;
  std::coroutine_handle<> self_;  // the task's frame, until it finishes or is destroyed

  // Join side.
  std::atomic<int> refs{2};
  std::atomic<join_phase> phase{join_phase::running};
  std::atomic<bool> detached{false};
  std::atomic<bool> failure_reported{false};
  std::coroutine_handle<> joiner;
  executor* joiner_owner = nullptr;
  std::stop_source stop;
  std::stop_token token = stop.get_token();
  std::exception_ptr failure_;  // the exception that escaped the task, kept for reporting

  complete_fn complete_;
  destroy_fn destroy_;

  /// Requests cancellation of the whole chain. Thread-safe.
  void request_stop() noexcept { stop.request_stop(); }

  /// Shutdown only: destroys the unfinished frame (and the chain of tasks it awaits), records
  /// corio::cancelled, and drops the root side's reference.
  void destroy_frame() noexcept;

  void release() noexcept {
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      destroy_(*this);
    }
  }
};

/// Prints an exception nobody will handle to stderr (the default report). Defined in src/core/root.cpp.
void print_unhandled_exception(std::exception_ptr failure) noexcept;

/// Reports `failure` of a task whose handle was dropped, once per record. Defined in src/core/root.cpp.
void report_unjoined_failure(root_base& root, std::exception_ptr failure, executor* owner) noexcept;

template <class T>
struct join_state : root_base {
  result_slot<T> result;

  explicit join_state(cancellable can_cancel) noexcept : root_base(can_cancel, &complete, &destroy) {}

  static join_state* create(cancellable can_cancel) {
    return ::new (allocate_frame(sizeof(join_state))) join_state(can_cancel);
  }

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
