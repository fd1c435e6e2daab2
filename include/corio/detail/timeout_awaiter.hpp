#pragma once
// with_timeout without a coroutine of its own: one awaiter that wraps the operand's awaiter, arms a
// timer on the awaiting thread, and cancels the operand through the stop token when it fires (or
// hands the deadline to an operand that carries it itself: io_uring's linked timeouts).
//
// Design note.
// Purpose: `co_await with_timeout(30s, stream.read_some(buf))` on every read of every connection must
//   cost little more than the read: no frame for the race, no frame for a sleep, no exception for the
//   sleep that lost, no lock. The common case (the operand wins) is one heap push and one heap removal
//   on the thread's own timer_queue plus a stop callback registration; for a socket operation on
//   io_uring, no timer at all (one more SQE in the same submission).
// How the operand sees the deadline: every corio awaitable takes its cancellation token from the
//   awaiting coroutine's promise (promise_base::stop_) in its await_suspend. For the duration of the
//   await, the awaiter points that promise at its own stop state (a member: no allocation), requested
//   by the timer's callback and by the awaiting task's own state (a forwarding stop_callback);
//   await_resume points it back. Nothing else reads a suspended coroutine's promise token, and a task
//   operand started from here inherits the awaiter's token for its chain, which finishes before
//   await_resume.
// Self-cancelling operands: an operand's awaiter with `void cancel_for_deadline() noexcept` (every corio
//   socket operation) is cancelled by the timer's callback calling it, on the thread that armed the
//   timer, which is the operation's reactor thread. Then nothing is forwarded and the chain's token is
//   not swapped: the operand keeps its stop callback on the task's own state, and one forwarding
//   registration and two token swaps per await are saved.
// Deadline hand-off: an operand's awaiter may carry the deadline itself (a corio socket operation on
//   io_uring: a timeout linked to its kernel request, io_op.hpp "Linked deadlines"). It says so through
//   two members, found by name: `bool offer_deadline(time_point)`, asked once before the operand
//   starts and before anything is armed (true: taken, so no timer is armed), and
//   `bool deadline_expired()`, asked after resumption (the taken deadline ended the operation). Either
//   way one deadline exists, never two, and the rest below is the same: the stop token is still
//   swapped (outer cancellation reaches the operand through it), a value the operand produced is still
//   returned, and an outer cancellation still wins over the deadline.
// Sequence:
//   await_ready: builds the operand's awaiter (in place); ready at once: no timer, no token.
//   await_suspend: forward the outer token, offer the deadline (or else arm the timer), swap the
//     token, the operand's await_suspend.
//     Once that returned "suspended", another thread may resume us: touch nothing. If it throws, undo.
//   timer fires (owning thread): request stop on the awaiter's source; the operand's stop callback
//     cancels it (io_uring ASYNC_CANCEL, epoll unlink, a channel waiter's claim...), and it completes.
//     A self-cancelling operand is cancelled directly (cancel_for_deadline), to the same effect.
//   a taken deadline passes: the operand ends itself (the kernel cancels the op) and says so later.
//   await_resume (the thread that resumed us): swap the token back, disarm (waits for a callback in
//     flight), drop the forwarding callback (waits likewise), then the operand's await_resume. If the
//     deadline fired (the timer's callback ran, or the operand's deadline_expired()) and the outer
//     task was not cancelled, an exception from the operand (its corio::cancelled) becomes
//     corio::timed_out; a value it produced is returned, never dropped (a socket operation the
//     kernel completed on its own, with bytes or its own error, returns that, however late: io_op.hpp,
//     deadline_cancelled).
// Staying put: the timer lives in the awaiting thread's executor, which must outlive it (its disarm
//   touches that executor's timer queue). So for the duration of the await the chain is marked as
//   sharing its executor (promise_base::shares_executor_, inherited by task operands), and a
//   schedule_on inside the operand is refused with std::logic_error, as it is inside when_all: moved
//   to another executor, the task could outlive this one and disarm into freed memory, and a stopped
//   executor would never fire the deadline. await_resume restores the chain's own mark.
// A frame destroyed while suspended here (shutdown): the destructor disarms (waiting for a callback in
//   flight), then the operand's awaiter, the forwarding callback and the source go, in that order.
// Memory order: the stop state and the timer entry carry their own (stop_state.hpp,
//   timer_queue.hpp); what the operand's completion wrote reaches us through its executor's schedule.
// Rejected: arming the timer and disarming it once an io operand took the deadline (a heap push and
//   removal per read for nothing); arming it after the operand started when not taken (a bad_alloc
//   from arm() would then leave a started operation behind an exception); when_any of the operand and
//   a sleep (the old with_timeout: three frames, and the losing sleep completed by throwing
//   corio::cancelled, ~14k instructions of unwinding per read).
#include <concepts>
#include <cstddef>
#include <coroutine>
#include <optional>
#include <type_traits>
#include <utility>

#include <corio/detail/awaitable_traits.hpp>
#include <corio/detail/promise_base.hpp>
#include <corio/detail/stop_state.hpp>
#include <corio/detail/timer_queue.hpp>
#include <corio/errors.hpp>

namespace corio::detail {

template <class Awaitable>
class timeout_awaiter : private timer {
 public:
  template <class Operand>
  timeout_awaiter(timer::clock::time_point deadline, Operand&& operand)
      : timer(deadline, &on_fire), operand_(std::forward<Operand>(operand)) {}
  /// Only before it is awaited (when_any and spawn take awaitables by value).
  timeout_awaiter(timeout_awaiter&& other) noexcept(std::is_nothrow_move_constructible_v<Awaitable>)
      : timer(other.deadline(), &on_fire), operand_(std::forward<Awaitable>(other.operand_)) {}
  timeout_awaiter& operator=(timeout_awaiter&&) = delete;
  ~timeout_awaiter() {
    if (armed()) {
      disarm();  // the frame is destroyed while suspended (shutdown): wait for a callback in flight
    }
  }

  bool await_ready() {
    inner_.emplace(std::forward<Awaitable>(operand_));  // an lvalue operand is awaited in place
    return inner_->awaiter.await_ready();
  }

  template <class Promise>
  decltype(auto) await_suspend(std::coroutine_handle<Promise> self) {
    static_assert(std::is_base_of_v<promise_base, Promise>, "corio::with_timeout: await it from a corio::task");
    promise_base& chain = self.promise();
    chain_ = &chain;
    outer_ = chain.stop_;
    outer_shares_executor_ = chain.shares_executor_;
    chain.shares_executor_ = true;  // see "Staying put"
    if constexpr (!cancels_itself) {
      stop_.follow(outer_);
    }
    try {
      if (!offer_deadline()) {
        arm();
      }
      if constexpr (!cancels_itself) {
        chain.stop_ = &stop_.state;
      }
      return inner_->awaiter.await_suspend(self);
    } catch (...) {
      undo();
      throw;
    }
  }

  await_result_t<Awaitable> await_resume() {
    if (chain_ == nullptr) {
      return inner_->awaiter.await_resume();  // was ready at once
    }
    bool deadline_passed = !undo() || deadline_expired();
    if (!deadline_passed || (outer_ != nullptr && outer_->stop_requested())) {
      return inner_->awaiter.await_resume();
    }
    try {
      return inner_->awaiter.await_resume();
    } catch (const cancelled&) {
      throw timed_out();  // the deadline came first and the operation stopped without a value
    }  // a failure of the operation's own passes through, as a value that came late does
  }

 private:
  // The operand's awaiter, built in place (it may be neither copyable nor movable).
  struct inner {
    awaiter_t<Awaitable> awaiter;
    explicit inner(Awaitable&& operand) : awaiter(get_awaiter(std::forward<Awaitable>(operand))) {}
  };

  using operand_awaiter = std::remove_cvref_t<awaiter_t<Awaitable>>;
  static constexpr bool takes_deadline =
      requires(operand_awaiter& a, const operand_awaiter& c, timer::clock::time_point d) {
    { a.offer_deadline(d) } -> std::same_as<bool>;
    { c.deadline_expired() } -> std::same_as<bool>;
  };

  // A corio socket operation cancels itself when the timer fires (io_op.hpp, "Deadlines on the timer
  // path"): no stop source of our own, no forwarding, no token swap.
  static constexpr bool cancels_itself = requires(operand_awaiter& a) {
    { a.cancel_for_deadline() } noexcept;
  };

  bool offer_deadline() {
    if constexpr (takes_deadline) {
      return inner_->awaiter.offer_deadline(deadline());
    } else {
      return false;
    }
  }
  bool deadline_expired() const noexcept {
    if constexpr (takes_deadline) {
      return inner_->awaiter.deadline_expired();
    } else {
      return false;
    }
  }

  static void on_fire(timer& t) noexcept {
    auto& self = static_cast<timeout_awaiter&>(t);
    if constexpr (cancels_itself) {
      self.inner_->awaiter.cancel_for_deadline();
    } else {
      self.stop_.state.request_stop(true);  // a deadline's: an operation's error_code form reports errc::timed_out
    }
  }

  // Points the chain back at its own token, disarms and drops the forwarding. Returns what disarm()
  // returned (false: the deadline fired).
  bool undo() noexcept {
    chain_->stop_ = outer_;
    chain_->shares_executor_ = outer_shares_executor_;
    chain_ = nullptr;
    bool disarmed = !armed() || disarm();
    stop_.forward.reset();
    return disarmed;
  }

  operand_stop stop_;  // the operand's token and its forwarding; destroyed last, after the operand's awaiter
  promise_base* chain_ = nullptr;
  stop_state* outer_ = nullptr;
  bool outer_shares_executor_ = false;
  Awaitable operand_;  // a reference for an lvalue operand (with_timeout), else the operand itself
  std::optional<inner> inner_;
};

}  // namespace corio::detail
