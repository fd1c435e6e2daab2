#pragma once
// Timers for coroutines: sleep_for, sleep_until, with_timeout.
//
// Design note (sleep_awaiter). A sleeping coroutine can be woken by two events racing on different
// threads: its timer firing (on whichever executor thread fires due timers) and its cancellation
// (on whichever thread requests stop). One atomic state decides the winner:
//   registering --fire--> fired_early      (await_suspend sees it and does not suspend)
//   registering --stop--> cancelled_early  (likewise)
//   registering --await_suspend done--> armed
//   armed --fire--> fired       : the firing thread schedules the coroutine
//   armed --stop--> cancelled   : the stopping thread disarms the timer, then schedules the coroutine
// Only the transition out of `armed` schedules, so the coroutine is resumed exactly once, and never
// while await_suspend is still touching the awaiter. Timer callbacks run under the timer queue's
// mutex, so after a successful disarm() no callback is in flight; a stop callback that loses the race
// is waited for by ~stop_callback before the frame can go. CAS operations are acq_rel.
#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <type_traits>
#include <utility>

#include <corio/detail/awaitable_traits.hpp>
#include <corio/detail/executor.hpp>
#include <corio/detail/promise_base.hpp>
#include <corio/detail/timer_queue.hpp>
#include <corio/errors.hpp>
#include <corio/task.hpp>
#include <corio/detail/join_child.hpp>
#include <corio/when_any.hpp>

namespace corio {

/// The clock every corio deadline is measured on.
using clock = std::chrono::steady_clock;

/// Thrown by with_timeout when the deadline passes before the operation completes.
class timed_out : public std::runtime_error {
 public:
  timed_out() : std::runtime_error("corio: operation timed out") {}
};

namespace detail {

class sleep_awaiter : private timer_queue::timer {
 public:
  explicit sleep_awaiter(clock::time_point deadline) noexcept : timer(deadline, &on_fire) {}
  sleep_awaiter(const sleep_awaiter&) = delete;
  sleep_awaiter& operator=(const sleep_awaiter&) = delete;
  ~sleep_awaiter() {
    if (owner_ != nullptr && state_.load(std::memory_order_acquire) == armed) {
      owner_->timers().disarm(*this);  // the frame is destroyed while asleep (shutdown)
    }
  }

  bool await_ready() const noexcept { return false; }

  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> self) {
    stop_ = stop_token_of(self);
    return suspend(self);
  }

  void await_resume() const {
    if (stop_ != nullptr && stop_->stop_requested()) {
      throw cancelled();
    }
  }

 private:
  enum state : std::uint8_t { registering, armed, fired_early, cancelled_early, fired, cancelled_late };

  struct on_stop {
    sleep_awaiter* self;
    void operator()() const noexcept { self->cancel(); }
  };

  bool suspend(std::coroutine_handle<> self);
  static void on_fire(timer_queue::timer& t) noexcept;
  void cancel() noexcept;
  bool settle(state early, state late) noexcept;

  executor* owner_ = nullptr;
  std::coroutine_handle<> waiter_;
  const std::stop_token* stop_ = nullptr;
  std::atomic<state> state_{registering};
  std::optional<std::stop_callback<on_stop>> stop_callback_;
};

/// Awaitable description of a sleep; cheap to copy and move, so it can be passed to when_any.
struct sleep_until_awaitable {
  clock::time_point deadline;
  sleep_awaiter operator co_await() const noexcept { return sleep_awaiter{deadline}; }
};

}  // namespace detail

/// Suspends the awaiting coroutine until `deadline` (at once if it has passed) on its event loop or
/// runtime; the thread is free meanwhile. Resumes on the executor that armed it. Cancellation of the
/// awaiting task wakes it early with corio::cancelled and removes its timer. Throws std::logic_error
/// when awaited on a thread that runs no event loop or runtime.
///
///     co_await corio::sleep_until(corio::clock::now() + 50ms);
[[nodiscard]] inline detail::sleep_until_awaitable sleep_until(clock::time_point deadline) noexcept { return {deadline}; }

/// Suspends the awaiting coroutine for `duration`; see sleep_until.
///
///     co_await corio::sleep_for(std::chrono::milliseconds(10));
template <class Rep, class Period>
[[nodiscard]] detail::sleep_until_awaitable sleep_for(std::chrono::duration<Rep, Period> duration) noexcept {
  return {clock::now() + std::chrono::duration_cast<clock::duration>(duration)};
}

/// Awaits `operation`, but gives up after `duration`: the operation is cancelled (it sees
/// corio::cancelled at its suspension point and is awaited until it stops) and corio::timed_out is
/// thrown. If the operation finishes first, its result or exception is passed through. If it produced
/// a value anyway, in the same instant as the deadline and too late to be cancelled, that value is
/// returned rather than dropped, so wrapping a channel's recv (or anything that consumes) in
/// with_timeout never loses what it took.
///
///     auto reply = co_await corio::with_timeout(1s, read_reply());
template <class Rep, class Period, class Awaitable>
task<detail::await_result_t<Awaitable>> with_timeout(std::chrono::duration<Rep, Period> duration, Awaitable operation) {
  detail::race_cancellation cancellation(co_await detail::current_stop_token{});
  detail::combinator_state join;
  join.cancel_on_first = &cancellation.source();
  auto op = detail::make_join_child(std::move(operation));
  auto timer = detail::make_join_child(sleep_for(duration));
  co_await detail::join_all_awaiter{join, 2, [&](const detail::promise_base* parent) {
    op.start(join, 0, cancellation.token(), parent);
    timer.start(join, 1, cancellation.token(), parent);
  }};
  if (join.first_done.load(std::memory_order_acquire) == 1 && op.result().error() != nullptr) {
    throw timed_out();  // the deadline came first and the operation stopped without a value
  }
  co_return op.result().take();
}

}  // namespace corio
