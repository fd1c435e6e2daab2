#pragma once
// corio::join_set<T>: spawn many tasks, take their results in completion order (tokio's JoinSet, Go's
// errgroup without the context).
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
#include <corio/errors.hpp>
#include <corio/join_handle.hpp>
#include <corio/semaphore.hpp>
#include <corio/task.hpp>

namespace corio {
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

}  // namespace detail

/// A set of spawned tasks whose results are taken in the order they finish. `spawn` starts a task on
/// the calling executor; `co_await set.next()` waits for the next one to finish and returns its value
/// (std::monostate for `void`), rethrows its exception, or returns nullopt once every task spawned so
/// far was taken. Move-only: a moved-from set is empty (next() yields nullopt, spawn() throws
/// corio::invalid_task); do not move it while a next() of it is suspended. Destroying the set (or
/// assigning another to it) cancels the tasks still running (their results are dropped);
/// `cancel_all()` does so without destroying it, and next() then yields what they return, their
/// corio::cancelled included. next() is a cancellation point that loses no result. Not thread-safe:
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
      : state_(std::move(other.state_)), pending_(std::exchange(other.pending_, 0)) {}
  join_set& operator=(join_set&& other) noexcept {
    if (this != &other) {
      cancel_all();
      state_ = std::move(other.state_);
      pending_ = std::exchange(other.pending_, 0);
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
      throw invalid_task("corio::join_set::spawn: empty or finished task");
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

  /// The next task to finish: its value, its exception rethrown, or nullopt if none is left.
  task<std::optional<value_type>> next() {
    if (pending_ == 0) {
      co_return std::nullopt;
    }
    co_await state_->finished.acquire();
    detail::result_slot<T> outcome;
    {
      std::lock_guard lock(state_->mutex);
      outcome = std::move(state_->outcomes.front());
      state_->outcomes.pop_front();
    }
    --pending_;
    if constexpr (std::is_void_v<T>) {
      outcome.take();
      co_return std::monostate{};
    } else {
      co_return outcome.take();
    }
  }

  /// Tasks spawned and not yet returned by next().
  std::size_t size() const noexcept { return pending_; }
  bool empty() const noexcept { return pending_ == 0; }

  /// Thread-safe: asks every task still running to stop.
  void cancel_all() {
    if (state_) {
      state_->cancel_all();
    }
  }

 private:
  std::shared_ptr<detail::join_set_state<T>> state_ = std::make_shared<detail::join_set_state<T>>();
  std::size_t pending_ = 0;
};

}  // namespace corio
