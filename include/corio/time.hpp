#pragma once
// Timers for coroutines: sleep_for, sleep_until, with_timeout.
//
// Design note (sleep_awaiter). A sleeping coroutine can be woken by two events racing on different
// threads: its timer firing (always on the thread that armed it, which owns the timer; see
// detail/timer_queue.hpp) and its cancellation (on whichever thread requests stop). One atomic state
// decides the winner:
//   registering --stop--> settled   (await_suspend sees it, disarms and does not suspend)
//   registering --await_suspend done--> waiting
//   waiting --fire or stop--> settled : the winner schedules the coroutine
// The timer cannot fire while registering: both run on the arming thread. Only the transition out of
// `waiting` schedules, so the coroutine is resumed exactly once, and never while await_suspend is still
// touching the awaiter. The resumed coroutine disarms its timer (giving back a fired entry, or
// cancelling one the stop beat), and disarm() waits for a callback in flight; a stop callback that
// loses the race is waited for by ~stop_callback before the frame can go. CAS operations are acq_rel.
// A deadline already passed when await_suspend runs arms nothing and does not suspend (nor does a
// stop already requested): no timer, no state change, only the cooperative budget.
#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include <corio/detail/awaitable_traits.hpp>
#include <corio/detail/deadline.hpp>
#include <corio/detail/executor.hpp>
#include <corio/detail/promise_base.hpp>
#include <corio/detail/stop_state.hpp>
#include <corio/detail/timeout_awaiter.hpp>
#include <corio/detail/timer_queue.hpp>
#include <corio/errors.hpp>
#include <corio/task.hpp>

namespace corio {

/// The clock every corio deadline is measured on.
using clock = std::chrono::steady_clock;

namespace detail {

class sleep_awaiter : private timer {
 public:
  explicit sleep_awaiter(clock::time_point deadline) noexcept : timer(deadline, &on_fire) {}
  sleep_awaiter(const sleep_awaiter&) = delete;
  sleep_awaiter& operator=(const sleep_awaiter&) = delete;
  ~sleep_awaiter() {
    if (armed()) {
      disarm();  // the frame is destroyed while asleep (shutdown)
    }
  }

  bool await_ready() const noexcept { return false; }

  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> self) {
    stop_ = stop_token_of(self);
    return suspend(self);
  }

  void await_resume() {
    if (armed()) {
      disarm();
    }
    if (stop_ != nullptr && stop_->stop_requested()) {
      throw cancelled();
    }
  }

 private:
  enum state : std::uint8_t { registering, waiting, settled };

  struct on_stop {
    sleep_awaiter* self;
    void operator()() const noexcept;
  };

  bool suspend(std::coroutine_handle<> self);
  static void on_fire(timer& t) noexcept;
  bool settle() noexcept;

  executor* owner_ = nullptr;
  std::coroutine_handle<> waiter_;
  stop_state* stop_ = nullptr;
  std::atomic<state> state_{registering};
  std::optional<stop_callback<on_stop>> stop_callback_;
};

/// Awaitable description of a sleep; cheap to copy and move, so it can be passed to when_any.
struct sleep_until_awaitable {
  clock::time_point deadline;
  sleep_awaiter operator co_await() const noexcept { return sleep_awaiter{deadline}; }
};

}  // namespace detail

/// Suspends the awaiting coroutine until `deadline` on its event loop or runtime; the thread is free
/// meanwhile. A deadline that has passed (sleep_for of zero or less) completes at once, without a
/// timer or a wait, as any await that does not suspend: it still spends the cooperative budget and is
/// still a cancellation point (`co_await corio::yield()` lets other tasks run). Resumes on the
/// executor that armed it. Cancellation of the awaiting task wakes it early with corio::cancelled and
/// removes its timer. Throws std::logic_error when awaited on a thread that runs no event loop or
/// runtime, whatever the deadline.
///
///     co_await corio::sleep_until(corio::clock::now() + 50ms);
[[nodiscard]] inline detail::sleep_until_awaitable sleep_until(clock::time_point deadline) noexcept { return {deadline}; }

/// Suspends the awaiting coroutine for `duration`; see sleep_until.
///
///     co_await corio::sleep_for(std::chrono::milliseconds(10));
template <class Rep, class Period>
[[nodiscard]] detail::sleep_until_awaitable sleep_for(std::chrono::duration<Rep, Period> duration) noexcept {
  return {detail::deadline_after<clock>(duration)};
}

/// Awaits `operation`, but gives up after `duration`: the operation is cancelled (it sees
/// corio::cancelled at its suspension point and is awaited until it stops) and corio::timed_out is
/// thrown. A socket operation in its error_code form stores std::errc::timed_out instead and
/// with_timeout returns what it yields (0 for a read; the bytes a write_all sent), without throwing:
/// `if (error == std::errc::timed_out)`. If the operation finishes first, its
/// result or exception is passed through. If it produced a value anyway, in the same instant as the
/// deadline and too late to be cancelled, that value is returned rather than dropped, so wrapping a
/// channel's recv (or anything that consumes) in with_timeout never loses what it took. The deadline
/// is a timer on the awaiting thread's loop or worker, or, for a socket operation that io_uring issues
/// as one request, a timeout the kernel links to that request; either costs no frame and no lock, so
/// re-arming it on every read is cheap. Await it from a corio::task; it is an awaitable, not a task (wrap it in
/// one to spawn it). Cancelling the awaiting task cancels the operation as usual. An lvalue operand is
/// awaited in place, not moved: `with_timeout(d, handle)` leaves a join_handle valid (and its task
/// asked to stop) at the deadline, so it can be awaited again; it must outlive the await.
///
///     auto n = co_await corio::with_timeout(30s, stream.read_some(buffer));
template <class Rep, class Period, class Awaitable>
[[nodiscard]] detail::timeout_awaiter<
    std::conditional_t<std::is_lvalue_reference_v<Awaitable>, Awaitable, std::remove_cvref_t<Awaitable>>>
with_timeout(std::chrono::duration<Rep, Period> duration, Awaitable&& operation) {
  return {detail::deadline_after<clock>(duration), std::forward<Awaitable>(operation)};
}

/// The same for a task, as a task (so that it can be spawned): the task runs under the deadline.
///
///     auto reply = co_await corio::with_timeout(1s, read_reply());
template <class Rep, class Period, class T>
task<T> with_timeout(std::chrono::duration<Rep, Period> duration, task<T> operation) {
  co_return co_await detail::timeout_awaiter<task<T>>(detail::deadline_after<clock>(duration),
                                                      std::move(operation));
}

}  // namespace corio
