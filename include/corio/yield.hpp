#pragma once
// corio::yield: let every other runnable coroutine go first.
#include <coroutine>

#include <corio/detail/executor.hpp>
#include <corio/detail/promise_base.hpp>
#include <corio/detail/stop_state.hpp>
#include <corio/errors.hpp>

namespace corio {
namespace detail {

struct yield_awaiter {
  stop_state* stop_ = nullptr;

  bool await_ready() const noexcept { return false; }
  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> self) {
    stop_ = stop_token_of(self);
    if (current_executor == nullptr) {
      return false;  // nothing else to let go first; still a cancellation point
    }
    current_executor->yield_current(self);
    return true;
  }
  void await_resume() const {
    if (stop_ != nullptr && stop_->stop_requested()) {
      throw cancelled();
    }
  }
};

}  // namespace detail

/// `co_await corio::yield()` moves the awaiting coroutine to the back of its executor's run queue
/// (an event loop's, or its runtime worker's local queue, where other workers may steal it), letting
/// everything already runnable go first. On a thread with no executor it continues at once. It is a
/// cancellation point on every thread: if the task's cancellation was requested it throws
/// corio::cancelled.
[[nodiscard]] inline detail::yield_awaiter yield() noexcept { return {}; }

}  // namespace corio
