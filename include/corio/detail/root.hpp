#pragma once
// A spawned task's root: the coroutine an executor owns on the task's behalf, and the join state it
// shares with the task's join_handle.
//
// Design note.
// Ownership: the root frame belongs to the executor that adopted it (registered in its registry until
//   it finishes, so a shutdown can find and destroy it). The join state is a separate pooled block
//   shared by the root and the join_handle, counted in `refs`; the last of the two frees it. Keeping
//   it apart from the frame lets a shutdown destroy frames while a join_handle still points at the
//   outcome.
// Join protocol (one atomic `phase`):
//   running --joiner parks--> joiner_waiting --root finishes--> finished (root resumes the joiner)
//   running --root finishes--> finished (a later joiner does not suspend)
//   The joiner stores itself before its acq_rel CAS; the root's acq_rel exchange reads it.
// Cancellation: `stop` is the source every task in the root's chain observes (their promise's `stop_`
//   points at `token`). join_handle::cancel() and shutdown request it; it is thread-safe. A root that
//   nothing can cancel (event_loop::spawn: no handle, and the loop destroys frames directly) gets an
//   empty source and a null `stop_`: no control block to allocate, no token to check at each yield.
// A root destroyed before finishing (shutdown) records corio::cancelled as its outcome and wakes no one
//   (its joiner, if any, is being destroyed by the same shutdown or will see `finished`).
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

/// The part of the join state that does not depend on T.
enum class cancellable : bool { no, yes };

struct join_state_base {
  explicit join_state_base(cancellable can_cancel)
      : stop(can_cancel == cancellable::yes ? std::stop_source() : std::stop_source(std::nostopstate)) {}

  std::atomic<int> refs{2};
  std::atomic<join_phase> phase{join_phase::running};
  std::atomic<bool> detached{false};
  std::atomic<bool> failure_reported{false};
  std::coroutine_handle<> joiner;
  executor* joiner_owner = nullptr;
  std::stop_source stop;
  std::stop_token token = stop.get_token();
};

template <class T>
struct join_state : join_state_base {
  result_slot<T> result;

  explicit join_state(cancellable can_cancel) : join_state_base(can_cancel) {}

  static join_state* create(cancellable can_cancel) {
    return ::new (allocate_frame(sizeof(join_state))) join_state(can_cancel);
  }
  void release() noexcept {
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      this->~join_state();
      deallocate_frame(this, sizeof(join_state));
    }
  }
};

/// The type-erased part of a root coroutine's promise: what executors and registries touch.
struct root_base : promise_base {
  executor* owner_ = nullptr;
  root_base* prev_ = nullptr;  // registry links, guarded by the owner's registry
  root_base* next_ = nullptr;
  unsigned shard_ = 0;
  std::coroutine_handle<> self_;
  join_state_base* join_ = nullptr;
  std::exception_ptr failure_;  // the exception that escaped the body, kept for reporting
  bool finished_ = false;

  /// Destroys this root's frame (and the chain of tasks it awaits) without running it further.
  void destroy_frame() noexcept { self_.destroy(); }
  /// Requests cancellation of the whole chain. Thread-safe.
  void request_stop() noexcept { join_->stop.request_stop(); }
};

/// Called from a root's final suspension: leaves the owner's registry, publishes the outcome, wakes
/// the joiner or reports an exception nobody will join. Defined in src/root.cpp.
void finish_root(root_base& root) noexcept;

/// Reports `failure` of a task whose handle was dropped, once per join state. Defined in src/root.cpp.
void report_unjoined_failure(join_state_base& state, std::exception_ptr failure, executor* owner) noexcept;

template <class T>
struct root_promise_common : root_base {
  join_state<T>* state_;

  explicit root_promise_common(cancellable can_cancel) : state_(join_state<T>::create(can_cancel)) {
    join_ = state_;
    stop_ = can_cancel == cancellable::yes ? &state_->token : nullptr;
  }
  ~root_promise_common() {
    if (!finished_) {
      state_->result.set_exception(std::make_exception_ptr(cancelled()));
      state_->phase.store(join_phase::finished, std::memory_order_release);
    }
    state_->release();
  }

  struct finish {
    bool await_ready() const noexcept { return false; }
    template <class Promise>
    void await_suspend(std::coroutine_handle<Promise> self) const noexcept {
      finish_root(self.promise());
      self.destroy();
    }
    void await_resume() const noexcept {}
  };

  finish final_suspend() const noexcept { return {}; }
  void unhandled_exception() noexcept {
    failure_ = std::current_exception();
    state_->result.set_exception(failure_);
  }
};

template <class T>
struct root_promise;

template <class T>
struct root_coroutine {
  using promise_type = root_promise<T>;
  std::coroutine_handle<promise_type> handle;
};

template <class T>
struct root_promise : root_promise_common<T> {
  // Receives make_root's arguments (C++20 lets a promise constructor see the coroutine's parameters).
  root_promise(task<T>&, cancellable can_cancel) : root_promise_common<T>(can_cancel) {}
  root_coroutine<T> get_return_object() noexcept {
    auto handle = std::coroutine_handle<root_promise>::from_promise(*this);
    this->self_ = handle;
    return {handle};
  }
  template <class U>
  void return_value(U&& value) {
    this->state_->result.set_value(std::forward<U>(value));
  }
};

template <>
struct root_promise<void> : root_promise_common<void> {
  root_promise(task<void>&, cancellable can_cancel) : root_promise_common<void>(can_cancel) {}
  root_coroutine<void> get_return_object() noexcept {
    auto handle = std::coroutine_handle<root_promise>::from_promise(*this);
    this->self_ = handle;
    return {handle};
  }
  void return_void() const noexcept {}
};

template <class T>
root_coroutine<T> make_root(task<T> body, cancellable) {
  co_return co_await std::move(body);
}

template <>
inline root_coroutine<void> make_root(task<void> body, cancellable) {
  co_await std::move(body);
}

}  // namespace corio::detail
