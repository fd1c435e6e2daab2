#pragma once
// The machinery shared by when_all and when_any: each awaited operand runs inside a small child
// coroutine, and a combinator_state counts the children down and resumes the parent after the last one.
//
// Counting: `remaining` starts at children + 1. Every child decrements it when it finishes; the
// parent decrements it once after starting them all. Whoever brings it to zero resumes the parent:
// a child by symmetric transfer, the parent by simply not suspending (await_suspend returns false),
// so children that finish inline never nest a resume on the stack. fetch_sub is acq_rel so the last
// decrementer sees every child's result.
//
// The first (when_any's winner) is decided when an operand completes, before its result is taken
// (operand_done, from the child's claiming_awaiter): the first to complete claims `first_done` and
// requests stop on every other operand's own state; one that completes later requests stop on its
// own state itself before its await_resume runs. So a loser always produces its result under a
// requested stop, and the winner under none, even when two complete on two workers at the same
// moment: a stream read that lost keeps its bytes for the next read instead of handing them to a
// result when_any discards (detail/read_stash.hpp). Deciding it when a child finished, after
// await_resume, let two reads on two workers both take their data with no stop requested, and one of
// them was dropped. request_stop() returns only once `requested` is set (the first caller sets it
// under the state's lock), so a loser's own call guarantees what it then sees.
//
// The first failure (when_all's) is decided the same way, when an operand's exception leaves it
// (operand_failed, from make_join_child's handler): the first to claim `first_failed` is the one
// when_all rethrows, and it requests stop on `stop_on_failure`, the state every when_all operand runs
// under, so the operands still running end at their next cancellation point instead of running on
// for a result when_all would drop (tokio's try_join!, Go's errgroup.WithContext). Those then fail
// with corio::cancelled, after the claim: the failure rethrown is always the one that caused it.
#include <atomic>
#include <coroutine>
#include <cstddef>
#include <exception>
#include <functional>
#include <span>
#include <type_traits>
#include <utility>

#include <corio/detail/awaitable_traits.hpp>
#include <corio/detail/promise_base.hpp>
#include <corio/detail/result_slot.hpp>
#include <corio/detail/stop_state.hpp>

namespace corio::detail {

struct combinator_state {
  static constexpr std::size_t none = static_cast<std::size_t>(-1);

  std::atomic<std::size_t> remaining{0};
  std::coroutine_handle<> parent;
  /// when_any only: each child's own stop state, requested for all but the first to complete. Own
  /// states, not one shared by all operands, so the winner takes its result under no stop: a stream
  /// read that won keeps its bytes, one that lost gives them back to its stream (read_stash.hpp).
  std::span<operand_stop> operand_stops;
  std::atomic<std::size_t> first_done{none};
  /// when_all only: the state its operands run under, stopped by the first failure.
  stop_state* stop_on_failure = nullptr;
  std::atomic<std::size_t> first_failed{none};

  void prepare(std::size_t children) noexcept { remaining.store(children + 1, std::memory_order_relaxed); }

  /// Parent side, after starting every child: true if it must wait.
  bool parent_should_wait(std::coroutine_handle<> awaiting) noexcept {
    parent = awaiting;
    return remaining.fetch_sub(1, std::memory_order_acq_rel) != 1;
  }

  /// A child's operand completed (its result not taken yet): the first claims `first_done` and
  /// (when_any) stops every other operand; a later one stops itself, so it takes its result under a
  /// requested stop even if the winner has not reached the others yet.
  void operand_done(std::size_t index) noexcept {
    std::size_t expected = none;
    bool first = first_done.compare_exchange_strong(expected, index, std::memory_order_acq_rel);
    if (operand_stops.empty()) {
      return;
    }
    if (!first) {
      operand_stops[index].state.request_stop();
      return;
    }
    for (std::size_t i = 0; i < operand_stops.size(); ++i) {
      if (i != index) {
        operand_stops[i].state.request_stop();
      }
    }
  }

  /// A child's operand failed (an exception is leaving it): the first claims `first_failed` and
  /// (when_all) stops the others.
  void operand_failed(std::size_t index) noexcept {
    std::size_t expected = none;
    if (first_failed.compare_exchange_strong(expected, index, std::memory_order_acq_rel) &&
        stop_on_failure != nullptr) {
      stop_on_failure->request_stop();
    }
  }

  std::coroutine_handle<> child_finished() noexcept {
    if (remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      return parent;
    }
    return std::noop_coroutine();
  }
};

template <class T>
class join_child;

template <class T>
struct join_child_promise_common : promise_base {
  combinator_state* join_ = nullptr;
  std::size_t index_ = 0;
  result_slot<T> result_;

  struct finish {
    bool await_ready() const noexcept { return false; }
    template <class Promise>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<Promise> self) const noexcept {
      auto& promise = self.promise();
      return promise.join_->child_finished();
    }
    void await_resume() const noexcept {}
  };
  finish final_suspend() const noexcept { return {}; }
  void unhandled_exception() noexcept { result_.set_exception(std::current_exception()); }
};

template <class T>
struct join_child_promise : join_child_promise_common<T> {
  join_child<T> get_return_object() noexcept;
  template <class U>
  void return_value(U&& value) {
    this->result_.set_value(std::forward<U>(value));
  }
};

template <>
struct join_child_promise<void> : join_child_promise_common<void> {
  join_child<void> get_return_object() noexcept;
  void return_void() const noexcept {}
};

/// One operand of when_all/when_any, wrapped in a coroutine the combinator can start and count.
template <class T>
class join_child {
 public:
  using promise_type = join_child_promise<T>;
  using handle_type = std::coroutine_handle<promise_type>;

  explicit join_child(handle_type handle) noexcept : handle_(handle) {}
  join_child(join_child&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  join_child& operator=(join_child&&) = delete;
  ~join_child() {
    if (handle_) {
      handle_.destroy();
    }
  }

  /// Runs the operand for `parent`'s root, cancelled through `stop`; operands share their parent's
  /// executor (promise_base::shares_executor_).
  void start(combinator_state& join, std::size_t index, stop_state* stop, const promise_base* parent) {
    promise_type& promise = handle_.promise();
    promise.join_ = &join;
    promise.index_ = index;
    promise.stop_ = stop;
    promise.root_ = parent != nullptr ? parent->root_ : nullptr;
    promise.shares_executor_ = true;
    handle_.resume();
  }

  result_slot<T>& result() noexcept { return handle_.promise().result_; }

 private:
  handle_type handle_;
};

template <class T>
join_child<T> join_child_promise<T>::get_return_object() noexcept {
  return join_child<T>{std::coroutine_handle<join_child_promise<T>>::from_promise(*this)};
}

inline join_child<void> join_child_promise<void>::get_return_object() noexcept {
  return join_child<void>{std::coroutine_handle<join_child_promise<void>>::from_promise(*this)};
}

/// A child's own promise, without suspending: where the combinator put its state and index.
struct this_join_child {
  promise_base* promise = nullptr;
  bool await_ready() const noexcept { return false; }
  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> self) noexcept {
    promise = &self.promise();
    return false;
  }
  promise_base& await_resume() const noexcept { return *promise; }
};

/// Awaits a child's operand and reports its completion (operand_done) before taking its result.
template <class A>
class claiming_awaiter {
 public:
  claiming_awaiter(A& operand, combinator_state& join, std::size_t index, bool& claimed)
      : awaiter_(get_awaiter(std::move(operand))), join_(join), index_(index), claimed_(claimed) {}

  bool await_ready() { return awaiter_.await_ready(); }
  template <class Promise>
  decltype(auto) await_suspend(std::coroutine_handle<Promise> self) {
    return awaiter_.await_suspend(self);
  }
  decltype(auto) await_resume() {
    claimed_ = true;
    join_.operand_done(index_);
    return awaiter_.await_resume();
  }

 private:
  awaiter_t<A> awaiter_;
  combinator_state& join_;
  std::size_t index_;
  bool& claimed_;
};

/// An operand that fails before it completes (an empty task, a timer armed off any executor, an
/// allocation in its start) has finished too: it reports so on its way out, or when_any would have no
/// winner (if every operand failed so) or would drop the failure and wait for another operand.
template <class A>
join_child<await_result_t<A>> make_join_child(A awaitable) {
  auto& promise = static_cast<join_child_promise<await_result_t<A>>&>(co_await this_join_child{});
  combinator_state& join = *promise.join_;
  std::size_t index = promise.index_;
  bool claimed = false;
  try {
    claiming_awaiter<A> operand(awaitable, join, index, claimed);
    co_return co_await operand;
  } catch (...) {
    if (!claimed) {
      join.operand_done(index);
    }
    join.operand_failed(index);
    throw;
  }
}

/// Starts every child, then suspends the parent until the last one finishes.
template <class StartAll>
struct join_all_awaiter {
  combinator_state& join_;
  std::size_t count_;
  StartAll start_all_;

  bool await_ready() const noexcept { return count_ == 0; }
  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> parent) {
    join_.prepare(count_);
    start_all_(chain_of(parent));
    return join_.parent_should_wait(parent);
  }
  void await_resume() const noexcept {}
};

template <class StartAll>
join_all_awaiter(combinator_state&, std::size_t, StartAll) -> join_all_awaiter<StartAll>;

/// `void` results become std::monostate, and lvalue references std::reference_wrapper, so they can
/// sit in a tuple or variant (a variant cannot hold a reference; a user trial found when_all and
/// when_any of task<T&> did not compile).
template <class T>
using non_void_t =
    std::conditional_t<std::is_void_v<T>, std::monostate,
                       std::conditional_t<std::is_lvalue_reference_v<T>,
                                          std::reference_wrapper<std::remove_reference_t<T>>, T>>;

template <class T>
non_void_t<T> take_non_void(result_slot<T>& slot) {
  if constexpr (std::is_void_v<T>) {
    slot.take();
    return {};
  } else {
    return slot.take();
  }
}

}  // namespace corio::detail
