#pragma once
// corio::task_scope: structured concurrency (a nursery). Children spawned in a scope are joined by it;
// the first failure cancels the siblings and is rethrown from join().
#include <coroutine>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <utility>

#include <corio/cancellation.hpp>
#include <corio/detail/child_handles.hpp>
#include <corio/detail/executor.hpp>
#include <corio/errors.hpp>
#include <corio/join_handle.hpp>
#include <corio/task.hpp>
#include <corio/wait_group.hpp>

namespace corio {
namespace detail {

/// The children's shared bookkeeping; children hold it too, so it outlives a scope destroyed early.
struct scope_state {
  wait_group running;
  std::mutex mutex;
  child_handles children;                   // guarded by mutex
  std::exception_ptr first_failure;         // guarded by mutex
  bool failure_observed = false;            // guarded by mutex: join() rethrew it
  bool cancelling = false;                  // guarded by mutex: children spawned from now on start cancelled

  /// Cancels every child, and (sticky) every child spawned later: a child that spawns a sibling while
  /// the scope is being cancelled (an accept loop between its accept and its spawn) must not add one
  /// that nobody cancels, which a cancelled join() would then wait for.
  void cancel_all() {
    std::lock_guard lock(mutex);
    cancelling = true;
    children.cancel_all();
  }

  /// Keeps a started child's handle, cancelling it at once if the scope is being cancelled.
  void adopt(join_handle<void> handle) {
    std::lock_guard lock(mutex);
    if (cancelling) {
      handle.cancel();
    }
    children.add(std::move(handle));
  }

  /// A failure that no join() rethrew goes to the executor's unhandled-exception report instead of
  /// being lost, once nobody can join any more: the scope, every join() in progress and every child
  /// hold this state, so it dies after the last of them. (Decided when a failure happened, a join()
  /// still waiting when its scope went rethrew a failure that was reported as well.)
  ~scope_state() {
    if (first_failure && !failure_observed) {
      report_failure(first_failure);
    }
  }
  scope_state() = default;
  scope_state(const scope_state&) = delete;
  scope_state& operator=(const scope_state&) = delete;

  /// A child failed. The first failure cancels the siblings.
  void record_failure(std::exception_ptr failure) {
    {
      std::lock_guard lock(mutex);
      if (first_failure) {
        return;
      }
      first_failure = failure;
    }
    cancel_all();
  }

  /// The scope is destroyed: cancel the children.
  void abandon() { cancel_all(); }

  /// Whether the task whose record is `root` is one of this scope's children.
  bool has_child(const root_base* root) {
    std::lock_guard lock(mutex);
    return root != nullptr && children.contains(root);
  }

  static void report_failure(std::exception_ptr failure) noexcept {
    if (current_executor != nullptr) {
      current_executor->report_unhandled(std::move(failure));
    } else {
      print_unhandled_exception(std::move(failure));
    }
  }
};

template <class T>
task<void> scope_child(std::shared_ptr<scope_state> state, task<T> body) {
  try {
    co_await std::move(body);
  } catch (const cancelled&) {
    // A sibling's failure or the scope's cancel() stopped it; not a failure of its own.
  } catch (...) {
    state->record_failure(std::current_exception());
  }
  state->running.done();
}

}  // namespace detail

/// A nursery for child tasks: `spawn` starts children on the current executor, `co_await join()`
/// waits for all of them. The first child to fail (with anything but corio::cancelled) cancels its
/// siblings, and join() rethrows that failure once every child has stopped. Cancellation sticks: once
/// a failure, cancel(), a cancelled join() or the scope's destruction has cancelled the children, a
/// child spawned later starts cancelled. If the task awaiting
/// join() is cancelled, the children are cancelled and join() still waits for them to stop before it
/// throws corio::cancelled, so no child outlives the join. Destroying a scope that was not joined
/// cancels every child still running (like tokio's JoinSet on drop); they finish on their executor,
/// and a child failure that join() never rethrew goes to the executor's unhandled-exception report
/// (a runtime's hook, an event_loop's run()) instead of being lost. spawn() also takes a callable
/// returning a task, kept alive inside the child (safe for capturing lambdas).
/// spawn/join/cancel are thread-safe. Move-only, while no other thread uses it: a moved-from scope
/// has no children (join() returns at once, spawn() throws corio::invalid_task), and assigning
/// another scope to one does what destroying it does first.
///
///     corio::task_scope scope;
///     for (auto& url : urls) scope.spawn(fetch(url));
///     co_await scope.join();                 // all fetched, or the first error
class task_scope {
 public:
  task_scope() = default;
  task_scope(task_scope&& other) noexcept = default;
  task_scope& operator=(task_scope&& other) noexcept {
    if (this != &other) {
      abandon();
      state_ = std::move(other.state_);
    }
    return *this;
  }
  ~task_scope() { abandon(); }

  /// Starts `body` as a child on the executor running the caller. Throws std::logic_error outside an
  /// event loop or runtime, corio::invalid_task for an empty task.
  template <class T>
  void spawn(task<T> body) {
    detail::executor* owner = detail::current_executor;
    if (owner == nullptr) {
      throw std::logic_error("corio::task_scope::spawn: no event loop or runtime runs on this thread");
    }
    if (!body.valid()) {
      throw invalid_task("corio::task_scope::spawn: empty, finished or already awaited task");
    }
    if (!state_) {
      throw invalid_task("corio::task_scope::spawn: the scope was moved from");
    }
    state_->running.add(1);
    join_handle<void> handle;
    try {
      handle = detail::spawn_on(*owner, detail::scope_child(state_, std::move(body)));
    } catch (...) {
      state_->running.done();  // it never started, so it will not count itself done
      throw;
    }
    // Started: from here the child counts itself done. Should its handle not fit (out of memory), it
    // still runs and join() still waits for it; only cancel() cannot reach it.
    state_->adopt(std::move(handle));
  }

  /// Spawns the task `make()` returns, keeping the callable alive inside the child.
  template <detail::task_factory F>
  void spawn(F&& make) {
    spawn(detail::invoke_keeping(std::decay_t<F>(std::forward<F>(make))));
  }

  /// Waits until every child has finished; rethrows the first failure. The join holds the scope's
  /// children from the call on, so the scope may be moved or destroyed before it is awaited. Throws
  /// std::logic_error when awaited from one of the scope's own children (it would wait for itself);
  /// a child that joins before spawn() has returned in its spawner (another worker, at once) is not
  /// recognised yet and waits for itself: let it reach a suspension point first.
  task<void> join() { return join_on(state_); }

  /// Thread-safe: cancels every child (each sees corio::cancelled at its next suspension point).
  /// A child that ends with corio::cancelled is not a failure, so a later join() returns normally
  /// once every child has stopped (as a cancelled Trio nursery or Kotlin job does), and still
  /// rethrows a failure a child had on its own. To tell the awaiting task, throw corio::cancelled
  /// after the join.
  void cancel() {
    if (state_) {
      state_->cancel_all();
    }
  }

 private:
  static task<void> wait_for(std::shared_ptr<detail::scope_state> state) { co_await state->running.wait(); }
  static task<void> join_on(std::shared_ptr<detail::scope_state> state) {
    if (!state) {
      co_return;  // moved from: no children
    }
    if (state->has_child(co_await detail::current_root())) {
      throw std::logic_error("corio::task_scope::join: awaited from one of the scope's own children");
    }
    bool cancelled_while_joining = false;
    try {
      co_await state->running.wait();
    } catch (const cancelled&) {
      cancelled_while_joining = true;
    }
    if (cancelled_while_joining) {
      state->cancel_all();
      co_await shield(wait_for(state));
      throw cancelled();
    }
    std::lock_guard lock(state->mutex);
    if (state->first_failure) {
      state->failure_observed = true;
      std::rethrow_exception(state->first_failure);
    }
  }
  void abandon() noexcept {
    if (state_) {
      state_->abandon();
    }
  }

  std::shared_ptr<detail::scope_state> state_ = std::make_shared<detail::scope_state>();
};

}  // namespace corio
