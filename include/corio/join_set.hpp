#pragma once
// corio::join_set<T>: spawn many tasks, take their results in completion order (tokio's JoinSet, Go's
// errgroup without the context).
#include <atomic>
#include <coroutine>
#include <cstddef>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <utility>

#include <corio/detail/child_handles.hpp>
#include <corio/detail/executor.hpp>
#include <corio/detail/join_child.hpp>
#include <corio/detail/result_slot.hpp>
#include <corio/detail/wait_list.hpp>
#include <corio/errors.hpp>
#include <corio/join_handle.hpp>
#include <corio/semaphore.hpp>
#include <corio/task.hpp>

namespace corio {

template <class T>
class join_set;

namespace detail {

/// What the set and its children share; children hold it, so it outlives a set destroyed early.
template <class T>
struct join_set_state {
  semaphore finished{0};  // one permit per outcome in `outcomes`
  std::mutex mutex;
  std::deque<result_slot<T>> outcomes;      // guarded by mutex, in completion order
  child_handles children;                   // guarded by mutex

  void cancel_all() {
    std::lock_guard lock(mutex);
    children.cancel_all();
  }
};

template <class T>
task<void> join_set_child(std::shared_ptr<join_set_state<T>> state, task<T> body) {
  result_slot<T> outcome;
  try {
    if constexpr (std::is_void_v<T>) {
      co_await std::move(body);
    } else {
      outcome.set_value(co_await std::move(body));
    }
  } catch (...) {
    outcome.set_exception(std::current_exception());
  }
  {
    std::lock_guard lock(state->mutex);
    state->outcomes.push_back(std::move(outcome));
  }
  state->finished.release();
}

/// The awaiter of join_set::next(): a wait for the set's next outcome (a permit of `finished`) that
/// takes the outcome only in await_resume, once the wait is known to complete: a next() whose task
/// was stopped first (cancelled, past with_timeout's deadline, or a when_any branch that lost, which
/// when_any stops before the loser's await_resume runs) gives the permit back and takes nothing.
template <class T>
class join_set_next_awaiter {
 public:
  explicit join_set_next_awaiter(join_set<T>& set) noexcept : set_(&set) {
    if (set.pending_ > set.reserved_) {  // an outcome no next() in flight waits for already
      wait_operation<> next_outcome = set.state_->finished.acquire();
      wait_.emplace(*next_outcome.list, next_outcome.context, *next_outcome.ops);
      ++set.reserved_;
      reserved_ = true;
    }
  }
  ~join_set_next_awaiter() {
    if (reserved_) {
      --set_->reserved_;  // its frame destroyed while it waited
    }
  }
  join_set_next_awaiter(const join_set_next_awaiter&) = delete;
  join_set_next_awaiter& operator=(const join_set_next_awaiter&) = delete;

  bool await_ready() const noexcept { return !wait_; }  // none left: nullopt at once

  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> self) {
    return wait_->await_suspend(self);
  }

  std::optional<non_void_t<T>> await_resume() {
    if (!wait_) {
      return std::nullopt;
    }
    --set_->reserved_;
    reserved_ = false;
    wait_->await_resume();  // throws corio::cancelled, giving the permit back, if stopped first
    result_slot<T> outcome;
    {
      std::lock_guard lock(set_->state_->mutex);
      outcome = std::move(set_->state_->outcomes.front());
      set_->state_->outcomes.pop_front();
    }
    --set_->pending_;
    if constexpr (std::is_void_v<T>) {
      outcome.take();
      return std::monostate{};
    } else {
      return outcome.take();
    }
  }

 private:
  join_set<T>* set_;
  std::optional<waiter> wait_;
  bool reserved_ = false;  // counted in the set's reserved_ until await_resume or destruction
};

/// What join_set::next() returns: `co_await` makes the immovable awaiter in the awaiting frame.
template <class T>
struct join_set_next {
  join_set<T>* set;
  join_set_next_awaiter<T> operator co_await() const noexcept { return join_set_next_awaiter<T>(*set); }
};

}  // namespace detail

/// A set of spawned tasks whose results are taken in the order they finish. `spawn` starts a task on
/// the calling executor; `co_await set.next()` waits for the next one to finish and returns its value
/// (std::monostate for `void`), rethrows its exception, or returns nullopt once every task spawned so
/// far was taken. Move-only: a moved-from set is empty (next() yields nullopt, spawn() throws
/// corio::invalid_task); do not move it while a next() of it is suspended. Destroying the set (or
/// assigning another to it) cancels the tasks still running (their results are dropped);
/// `cancel_all()` does so without destroying it, and next() then yields what they return, their
/// corio::cancelled included. next() is a cancellation point that loses no result: one cancelled, timed
/// out or beaten in a when_any takes none, and the next next() returns it. Several next() in flight at
/// once (a when_all of two) wait for different outcomes: one made while every pending task already has
/// a next() waiting for it returns nullopt at once. Not thread-safe:
/// one owning task at a time (the children may run on any worker).
///
///     corio::join_set<int> set;
///     for (int i = 0; i < 10; ++i) set.spawn(square(i));
///     int sum = 0;
///     while (auto v = co_await set.next()) sum += *v;    // in completion order
template <class T>
class join_set {
 public:
  using value_type = detail::non_void_t<T>;

  join_set() = default;
  join_set(join_set&& other) noexcept
      : state_(std::move(other.state_)),
        pending_(other.pending_.exchange(0)),
        reserved_(other.reserved_.exchange(0)) {}
  join_set& operator=(join_set&& other) noexcept {
    if (this != &other) {
      cancel_all();
      state_ = std::move(other.state_);
      pending_ = other.pending_.exchange(0);
      reserved_ = other.reserved_.exchange(0);
    }
    return *this;
  }
  ~join_set() { cancel_all(); }

  /// Starts `body` on the executor running the caller. Throws std::logic_error outside an event loop
  /// or runtime, corio::invalid_task for an empty task, and the executor's stopped error.
  void spawn(task<T> body) {
    detail::executor* owner = detail::current_executor;
    if (owner == nullptr) {
      throw std::logic_error("corio::join_set::spawn: no event loop or runtime runs on this thread");
    }
    if (!body.valid()) {
      throw invalid_task("corio::join_set::spawn: empty, finished or already awaited task");
    }
    if (!state_) {
      throw invalid_task("corio::join_set::spawn: the set was moved from");
    }
    auto handle = detail::spawn_on(*owner, detail::join_set_child(state_, std::move(body)));
    std::lock_guard lock(state_->mutex);
    state_->children.add(std::move(handle));
    ++pending_;
  }

  /// Spawns the task `make()` returns, keeping the callable alive inside the task.
  template <detail::task_factory F>
  void spawn(F&& make) {
    spawn(detail::invoke_keeping(std::decay_t<F>(std::forward<F>(make))));
  }

  /// The next task to finish: its value, its exception rethrown, or nullopt if none is left. A
  /// copyable description (it may be passed to when_any or with_timeout); it does nothing until
  /// awaited.
  [[nodiscard]] detail::join_set_next<T> next() noexcept { return detail::join_set_next<T>{this}; }

  /// Tasks spawned and not yet returned by next().
  std::size_t size() const noexcept { return pending_.load(); }
  bool empty() const noexcept { return pending_.load() == 0; }

  /// Thread-safe: asks every task still running to stop.
  void cancel_all() {
    if (state_) {
      state_->cancel_all();
    }
  }

 private:
  friend class detail::join_set_next_awaiter<T>;

  std::shared_ptr<detail::join_set_state<T>> state_ = std::make_shared<detail::join_set_state<T>>();
  // Atomic: two next() of one when_all may finish on two workers at once. pending_ >= reserved_ always
  // (a next() reserves only below pending_, and gives its reservation back before taking an outcome).
  std::atomic<std::size_t> pending_{0};
  std::atomic<std::size_t> reserved_{0};  // outcomes a next() in flight waits for (two next() wait for two)
};

}  // namespace corio
