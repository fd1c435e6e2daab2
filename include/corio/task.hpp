#pragma once
// corio::task<T>: a lazy, move-only coroutine that produces one T (or an exception) for its awaiter.
#include <coroutine>
#include <exception>
#include <utility>

#include <corio/detail/coop_budget.hpp>
#include <corio/detail/promise_base.hpp>
#include <corio/detail/result_slot.hpp>
#include <corio/errors.hpp>

namespace corio {

template <class T = void>
class task;

namespace detail {

template <class T>
struct task_promise_common : promise_base {
  result_slot<T> result_;
  void unhandled_exception() noexcept { result_.set_exception(std::current_exception()); }
};

template <class T>
struct task_promise : task_promise_common<T> {
  task<T> get_return_object() noexcept;
  template <class U>
  void return_value(U&& value) {
    this->result_.set_value(std::forward<U>(value));
  }
};

template <>
struct task_promise<void> : task_promise_common<void> {
  task<void> get_return_object() noexcept;
  void return_void() const noexcept {}
};

}  // namespace detail

/// A lazy coroutine producing a `T`. Nothing runs until the task is awaited; the awaiter resumes on
/// whichever thread the task completes on (on a loop, that loop's thread). Exceptions thrown in the
/// body propagate out of `co_await`. A task is single-shot: awaiting it a second time, or awaiting a
/// moved-from task, throws `corio::invalid_task`. Destroying a task that was never awaited destroys
/// its frame without running it. Not thread-safe: one owner at a time.
///
///     corio::task<int> answer() { co_return 42; }
///     corio::task<> caller() {
///       int x = co_await answer();   // starts answer(), resumes here when it finishes
///     }
template <class T>
class [[nodiscard]] task {
  static_assert(detail::fits_frame_alignment<T>(),
                "corio::task<T>: a T aligned beyond the default new alignment cannot be stored in a coroutine "
                "frame (it would be misaligned); return it through a std::unique_ptr");

 public:
  using promise_type = detail::task_promise<T>;
  using handle_type = std::coroutine_handle<promise_type>;
  using value_type = T;

  task() noexcept = default;
  explicit task(handle_type handle) noexcept : handle_(handle) {}
  task(task&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  task& operator=(task other) noexcept {
    std::swap(handle_, other.handle_);
    return *this;
  }
  ~task() {
    if (handle_) {
      handle_.destroy();
    }
  }

  /// True if this task holds a coroutine that may be awaited or spawned now: not empty, not finished,
  /// and not being awaited already.
  bool valid() const noexcept { return handle_ && !handle_.done() && !handle_.promise().continuation_; }

  struct awaiter {
    handle_type handle_;

    bool await_ready() const {
      if (!handle_) {
        throw invalid_task("corio::task: awaiting an empty (moved-from or default) task");
      }
      if (handle_.done()) {
        throw invalid_task("corio::task: awaiting a task that was already awaited");
      }
      if (handle_.promise().continuation_) {
        // Its first await is still suspended: a second would resume a coroutine parked elsewhere.
        throw invalid_task("corio::task: awaiting a task that is already being awaited");
      }
      return false;
    }
    template <class Promise>
    bool await_suspend(std::coroutine_handle<Promise> awaiting) {
      if (detail::spend_coop_budget()) {
        // Out of budget: requeue the child (yield_for_budget) instead of running it now; it
        // resumes us when it finishes, as any asynchronously completing child does.
        detail::promise_base& child = handle_.promise();
        child.continuation_ = awaiting;
        child.inherit_chain(detail::chain_of(awaiting));
        child.state_.store(detail::await_state::awaiter_suspended, std::memory_order_relaxed);
        detail::current_executor->yield_for_budget(handle_);
        return true;
      }
      return detail::start_child(handle_, awaiting);
    }
    T await_resume() { return handle_.promise().result_.take(); }
  };

  awaiter operator co_await() const& noexcept { return awaiter{handle_}; }
  awaiter operator co_await() const&& noexcept { return awaiter{handle_}; }

  /// Gives up ownership of the coroutine (used by spawn and the combinators).
  handle_type release() noexcept { return std::exchange(handle_, {}); }

 private:
  handle_type handle_;
};

namespace detail {

template <class T>
task<T> task_promise<T>::get_return_object() noexcept {
  return task<T>{std::coroutine_handle<task_promise<T>>::from_promise(*this)};
}

inline task<void> task_promise<void>::get_return_object() noexcept {
  return task<void>{std::coroutine_handle<task_promise<void>>::from_promise(*this)};
}

}  // namespace detail
}  // namespace corio
