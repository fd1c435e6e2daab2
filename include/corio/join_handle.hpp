#pragma once
// corio::spawn and corio::join_handle<T>: start a task on the current executor and join it later.
#include <atomic>
#include <coroutine>
#include <type_traits>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>

#include <corio/detail/coop_budget.hpp>
#include <corio/detail/executor.hpp>
#include <corio/detail/promise_base.hpp>
#include <corio/detail/root.hpp>
#include <corio/detail/stop_state.hpp>
#include <corio/detail/task_factory.hpp>
#include <corio/errors.hpp>
#include <corio/task.hpp>

namespace corio {

/// The handle to a spawned task: await it for the task's result, cancel it, or detach it.
/// Awaiting yields the task's value or rethrows its exception (corio::cancelled if it was cancelled
/// or destroyed by its executor's shutdown before finishing), resuming on the awaiter's executor.
/// A handle is joined at most once: awaiting it again, or awaiting a detached or moved-from handle,
/// throws corio::invalid_task. If the awaiting task is itself cancelled while it waits, it asks the
/// joined task to stop too and throws corio::cancelled at once, without waiting for it (so
/// `with_timeout(d, h)` returns at its deadline). A handle awaited in place (`co_await h`,
/// `with_timeout(d, h)`) is then still valid and may be awaited again, from a task not being
/// cancelled, for the joined task's outcome (corio::cancelled, unless it shields itself); one moved
/// into with_timeout (`std::move(h)`) is dropped with it (its task is detached).
/// Dropping a handle detaches the task: it keeps running, and an exception escaping it
/// is reported by its executor (a runtime's unhandled-exception hook, an event_loop's run()), even if
/// that happens after the task finished. Not thread-safe, except cancel(), which may be called from
/// any thread while the handle is being awaited, but not while it is detached, moved or destroyed
/// (a joined handle keeps its task's record until then).
///
///     corio::join_handle<int> h = corio::spawn(compute());
///     h.cancel();                            // optional: ask it to stop
///     int v = co_await std::move(h);         // or corio::cancelled
template <class T>
class [[nodiscard]] join_handle {
 public:
  join_handle() noexcept = default;
  explicit join_handle(detail::join_state<T>* state) noexcept : state_(state) {}
  join_handle(join_handle&& other) noexcept
      : state_(std::exchange(other.state_, nullptr)),
        joined_(other.joined_.exchange(false, std::memory_order_relaxed)) {}
  join_handle& operator=(join_handle other) noexcept {
    std::swap(state_, other.state_);
    bool joined = joined_.load(std::memory_order_relaxed);
    joined_.store(other.joined_.load(std::memory_order_relaxed), std::memory_order_relaxed);
    other.joined_.store(joined, std::memory_order_relaxed);
    return *this;
  }
  ~join_handle() { detach(); }

  /// True while the handle refers to a task that has not been joined or detached.
  bool valid() const noexcept { return state_ != nullptr && !joined_.load(std::memory_order_acquire); }

  /// Whether this handle's task is the one whose record is `root` (a task's detail::current_root()).
  bool refers_to(const detail::root_base* root) const noexcept { return state_ != nullptr && state_ == root; }

  /// True once the task has finished (or was destroyed by its executor's shutdown).
  bool is_finished() const noexcept {
    return state_ != nullptr && state_->phase.load(std::memory_order_acquire) == detail::join_phase::finished;
  }

  /// Asks the task to stop: its current or next suspension point completes with corio::cancelled.
  /// From any thread, a join of this handle in progress included, but not at the same time as its
  /// detach, move or destruction. On a joined handle it does nothing (the task has finished: a
  /// canceller on another thread cannot know whether the join it races has ended, and tokio's
  /// abort() of a finished task is a no-op too). Throws corio::invalid_task on an empty (detached
  /// or moved-from) handle.
  void cancel() const {
    if (state_ == nullptr) {
      throw invalid_task("corio::join_handle::cancel: empty (detached or moved-from) handle");
    }
    state_->stop.request_stop();  // a joined handle keeps the record, whose task has finished: no effect
  }

  /// Lets the task run on unobserved; the handle becomes empty. No-op on an empty handle.
  void detach() noexcept {
    detail::join_state<T>* state = std::exchange(state_, nullptr);
    if (state == nullptr) {
      return;
    }
    if (joined_.exchange(false, std::memory_order_relaxed)) {
      state->release();  // joined: the outcome was taken, nothing is left to report
      return;
    }
    // Store, then load: seq_cst against end_join's CAS, then load (root.hpp, "Detach versus finish").
    state->detached.store(true, std::memory_order_seq_cst);
    if (state->phase.load(std::memory_order_seq_cst) == detail::join_phase::finished) {
      detail::report_unjoined_failure(*state, nullptr);
    }
    state->release();
  }

  class awaiter {
   public:
    explicit awaiter(join_handle& handle) : handle_(handle) {}
    awaiter(const awaiter&) = delete;
    awaiter& operator=(const awaiter&) = delete;
    ~awaiter() {
      if (suspended_) {
        abandon();  // the awaiting frame is destroyed while it waits (its executor shuts down)
      }
    }

    bool await_ready() const {
      if (!handle_.valid()) {
        throw invalid_task("corio::join_handle: awaiting an empty (detached, moved-from or joined) handle");
      }
      return false;
    }

    template <class Promise>
    bool await_suspend(std::coroutine_handle<Promise> self) {
      using detail::join_phase;
      detail::join_state<T>& state = *handle_.state_;
      detail::stop_state* stop = detail::stop_token_of(self);
      auto phase = join_phase::running;
      if (!state.phase.compare_exchange_strong(phase, join_phase::registering, std::memory_order_acq_rel)) {
        return detail::yield_if_budget_spent(self);  // finished already: take the outcome now
      }
      state.joiner = self;
      state.joiner_owner = detail::current_owner();
      if (stop != nullptr) {
        stop_callback_.emplace(*stop, on_stop{this});  // may run at once: it then marks the phase
      }
      suspended_ = true;  // before the CAS: once armed, another thread may resume us at once
      phase = join_phase::registering;
      if (state.phase.compare_exchange_strong(phase, join_phase::joiner_waiting, std::memory_order_acq_rel)) {
        return true;  // armed: touch nothing from here on
      }
      suspended_ = false;
      if (phase == join_phase::registering_cancelled &&
          state.phase.compare_exchange_strong(phase, join_phase::running, std::memory_order_acq_rel)) {
        state.stop.request_stop();
        cancelled_ = true;
      }
      return detail::yield_if_budget_spent(self);  // cancelled, or the task finished while we registered
    }

    T await_resume() {
      suspended_ = false;
      stop_callback_.reset();
      if (cancelled_) {
        throw cancelled();
      }
      // Joined. The handle keeps the record until it is dropped, so that a cancel() racing this join on
      // another thread still finds it (it then asks a finished task to stop, which does nothing). No
      // report will need the record's copy of a failure: dropped here, so the exception's last
      // reference goes on this thread, which handles it, not on the finishing worker (which
      // ThreadSanitizer, blind to the exception's reference count, would report as a race).
      detail::join_state<T>* state = handle_.state_;
      handle_.joined_.store(true, std::memory_order_release);
      state->failure_ = nullptr;
      return state->result.take();
    }

   private:
    struct on_stop {
      awaiter* self;
      void operator()() const noexcept { self->cancel(); }
    };

    // Any thread, from the awaiting task's stop callback: asks the joined task to stop, and stops
    // waiting for it (see root.hpp for the phases).
    void cancel() noexcept {
      using detail::join_phase;
      detail::join_state<T>& state = *handle_.state_;
      state.stop.request_stop();
      auto phase = join_phase::registering;
      if (state.phase.compare_exchange_strong(phase, join_phase::registering_cancelled, std::memory_order_acq_rel)) {
        return;  // the joiner is still registering: it sees this and does not suspend
      }
      if (phase == join_phase::joiner_waiting && unregister()) {
        cancelled_ = true;
        detail::resume_through(state.joiner_owner, state.joiner);
      }
    }

    bool unregister() noexcept {
      auto expected = detail::join_phase::joiner_waiting;
      return handle_.state_->phase.compare_exchange_strong(expected, detail::join_phase::running,
                                                           std::memory_order_acq_rel);
    }

    void abandon() noexcept {
      stop_callback_.reset();  // waits for a cancel() in flight
      if (unregister()) {
        return;
      }
      // The task ended and its side is scheduling us: keep the frame and executor alive until done.
      while (handle_.state_->phase.load(std::memory_order_acquire) == detail::join_phase::waking) {
        std::this_thread::yield();
      }
    }

    join_handle& handle_;
    bool suspended_ = false;
    bool cancelled_ = false;
    std::optional<detail::stop_callback<on_stop>> stop_callback_;
  };

  awaiter operator co_await() & { return awaiter{*this}; }
  awaiter operator co_await() && { return awaiter{*this}; }

 private:
  detail::join_state<T>* state_ = nullptr;
  std::atomic<bool> joined_{false};  // awaited to the end (written by the join, read by cancel())
};

namespace detail {

/// Makes `body` a spawned root of `owner` (which queues it to start) and returns its handle.
template <class T>
join_handle<T> spawn_on(executor& owner, task<T> body, cancellable can_cancel = cancellable::yes) {
  if (!body.valid()) {
    throw invalid_task("corio::spawn: empty, finished or already awaited task");
  }
  join_state<T>* state = join_state<T>::create();
  auto frame = body.release();
  promise_base& promise = frame.promise();
  promise.root_ = state;
  promise.spawned_ = true;
  if (promise.stop_ == nullptr && can_cancel == cancellable::yes) {
    promise.stop_ = &state->stop;  // a token already given to the task wins, as in start_child
  }
  state->owner_ = &owner;
  state->self_ = frame;
  state->seq_ = next_root_sequence();
  try {
    owner.adopt(*state);
  } catch (...) {
    frame.destroy();
    state->release();
    state->release();
    throw;
  }
  return join_handle<T>{state};
}

}  // namespace detail

/// Spawns `body` on the executor running the calling code (an event_loop or a runtime worker); it
/// starts when that executor next schedules it, and may run on any of a runtime's workers.
/// Throws std::logic_error on a thread that runs neither (use runtime::spawn from outside), and
/// corio::invalid_task for an empty task. Thread: the calling executor's.
///
///     auto h = corio::spawn(worker(i));
template <class T>
join_handle<T> spawn(task<T> body) {
  detail::executor* owner = detail::current_executor;
  if (owner == nullptr) {
    throw std::logic_error("corio::spawn: no event loop or runtime runs on this thread (use runtime::spawn)");
  }
  return detail::spawn_on(*owner, std::move(body));
}

/// Spawns the task that `make()` returns, keeping the callable (and a lambda's captures) alive inside
/// the task for as long as it runs, so a capturing lambda coroutine is safe to spawn:
///
///     corio::spawn([conn = std::move(conn)]() -> corio::task<> { co_await serve(conn); });
template <detail::task_factory F>
auto spawn(F&& make) {
  return spawn(detail::invoke_keeping(std::decay_t<F>(std::forward<F>(make))));
}

}  // namespace corio
