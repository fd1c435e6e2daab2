#pragma once
// corio::runtime: a multi-thread, work-stealing runtime for coroutines, and spawn_blocking.
#include <atomic>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>

#include <corio/detail/blocking_pool.hpp>
#include <corio/detail/coop_budget.hpp>
#include <corio/detail/executor.hpp>
#include <corio/detail/result_slot.hpp>
#include <corio/detail/stop_state.hpp>
#include <corio/errors.hpp>
#include <corio/io_backend.hpp>
#include <corio/join_handle.hpp>
#include <corio/sync_wait.hpp>
#include <corio/task.hpp>

namespace corio {

namespace detail {
class scheduler;
/// The blocking pool of the runtime whose worker runs the calling code, or null.
blocking_pool* current_blocking_pool() noexcept;
}  // namespace detail

/// A pool of worker threads that run coroutines, with work stealing between them.
///
/// Each worker has a bounded local queue, a LIFO slot for the task it just woke, and shares a global
/// injection queue; an idle worker steals half of a busy one's queue, and parks (futex) when there is
/// nothing anywhere, woken only when work appears and nobody is already looking. Fairness is
/// cooperative: a task whose awaits complete at once 128 times in a row (any corio awaitable spends the
/// budget) yields at the next one, behind the task its worker last woke; a loop with no co_await at all
/// holds its worker (put such work in spawn_blocking). Thread-safe: spawn(), block_on() (from
/// non-runtime threads) and the destructor.
///
/// Destruction shuts down in numbered steps: stop accepting spawns; cancel every live task; run them
/// until every task has finished (its cleanup, shielded, may still wait for a socket, a timer or a
/// channel) or a 1 s grace period has passed; join the workers; destroy the frames still alive that
/// wait for no spawn_blocking call; wait for running spawn_blocking calls (dropping those not started);
/// destroy the rest.
///
///     corio::runtime rt;                                   // one worker per online CPU
///     int answer = rt.block_on([]() -> corio::task<int> {
///       auto h = corio::spawn(compute());                  // runs on any worker
///       co_return co_await std::move(h);
///     }());
class runtime {
 public:
  /// The most workers a runtime takes (options.workers above it throws std::invalid_argument).
  static constexpr std::size_t max_workers = 4096;

  struct options {
    /// Worker threads; 0 means one per CPU the constructing thread may run on (its affinity mask, which
    /// taskset or a container's cpuset sets for the whole process).
    std::size_t workers = 0;
    /// Upper bound on spawn_blocking threads; at least 1 (0 throws std::invalid_argument).
    std::size_t max_blocking_threads = detail::default_blocking_threads;
    /// Called (on a worker thread) with an exception that escaped a task nobody joins; by default it
    /// is printed to stderr, one line naming its type (and what() for a std::exception).
    std::function<void(std::exception_ptr)> on_unhandled_exception = {};
    /// The reactor backend of every worker (see corio/io_backend.hpp); automatic by default.
    io_backend backend = io_backend::automatic;
  };

  runtime();
  /// Throws std::invalid_argument for options out of range, and std::system_error (naming the worker)
  /// if a worker thread cannot be started; the workers already started are stopped and joined first.
  explicit runtime(options opts);
  /// shutdown(), then frees the runtime. Destroying it on one of its own workers (the last owner of a
  /// shared_ptr to it dropped inside one of its tasks) or its own spawn_blocking threads cannot join
  /// that thread: shutdown() throws there, and a destructor that throws calls std::terminate, with the
  /// message (tokio panics alike).
  ~runtime();
  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;

  /// Runs `body` on the runtime and blocks the calling thread until it finishes; returns its value
  /// or rethrows its exception. Throws std::logic_error, with nothing spawned, where sync_wait
  /// would (on a thread that runs an event loop or a runtime worker: that would block it, co_await
  /// the task instead; in a frame a shutdown is destroying), and corio::runtime_stopped after
  /// shutdown().
  template <class T>
  T block_on(task<T> body) {
    if (const char* why = detail::blocking_refused_here()) {
      throw std::logic_error(std::string("corio::runtime::block_on: called ") + why);
    }
    return sync_wait(spawn(std::move(body)));
  }

  /// Runs the task `make()` returns, as above, keeping the callable alive inside it:
  /// `rt.block_on([&]() -> corio::task<int> { ... })`.
  template <detail::task_factory F>
  auto block_on(F&& make) {
    return block_on(detail::invoke_keeping(std::decay_t<F>(std::forward<F>(make))));
  }

  /// Spawns `body` from any thread; it starts on some worker. Throws corio::runtime_stopped after
  /// shutdown() and corio::invalid_task for an empty task.
  template <class T>
  join_handle<T> spawn(task<T> body) {
    return detail::spawn_on(executor(), std::move(body));
  }

  /// Spawns the task `make()` returns, keeping the callable (a capturing lambda) alive in the task.
  template <detail::task_factory F>
  auto spawn(F&& make) {
    return spawn(detail::invoke_keeping(std::decay_t<F>(std::forward<F>(make))));
  }

  /// Shuts the runtime down now (the steps above); idempotent: a call made while another thread's runs
  /// waits for it to finish. Throws std::logic_error if called from one of its own workers.
  void shutdown();

  /// The number of worker threads.
  std::size_t workers() const noexcept;

 private:
  detail::executor& executor() noexcept;

  std::unique_ptr<detail::scheduler> scheduler_;
};

namespace detail {

// One spawn_blocking call, shared by its awaiter and its job on the blocking pool (two references;
// the last to let go frees it), so either side may end first: a cancelled awaiter leaves the call
// running, detached, and its result is discarded when it returns (tokio's semantics).
// Phase (one atomic):
//   running --awaiter parks--> waiting --call returns--> waking --awaiter scheduled--> done
//   running --call returns--> done                 (the awaiter does not suspend)
//   running|waiting --awaiter cancelled or destroyed--> abandoned   (the call's result is dropped)
// Only the transition out of `waiting` schedules the awaiter, so it is resumed exactly once. `waking`
// covers the job's call into the awaiter's executor: an awaiter destroyed meanwhile waits for `done`.
// A stop callback that loses the race is waited for by ~stop_callback before the frame can go. CAS
// operations are acq_rel; the result is written before the job's CAS, read after the awaiter's.
template <class F>
struct blocking_call {
  using result_type = std::invoke_result_t<F&>;
  enum phase_t : std::uint8_t { running, waiting, waking, done, abandoned };

  explicit blocking_call(F f) : fn(std::move(f)) {}

  F fn;
  result_slot<result_type> result;
  std::atomic<phase_t> phase{running};
  std::atomic<int> refs{2};
  executor* owner = nullptr;
  std::coroutine_handle<> waiter;

  void release() noexcept {
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      delete this;
    }
  }

  // The job, on a blocking thread (or, dropped unrun, on the thread shutting the runtime down).
  static void run(void* context, bool execute) noexcept {
    auto& self = *static_cast<blocking_call*>(context);
    if (!execute) {
      self.result.set_exception(std::make_exception_ptr(cancelled()));
    } else if (self.phase.load(std::memory_order_acquire) != abandoned) {
      try {
        if constexpr (std::is_void_v<result_type>) {
          self.fn();
        } else {
          self.result.set_value(self.fn());
        }
      } catch (...) {
        self.result.set_exception(std::current_exception());
      }
    }
    phase_t before = self.phase.load(std::memory_order_acquire);
    while (before == running || before == waiting) {
      phase_t next = before == waiting ? waking : done;
      if (self.phase.compare_exchange_weak(before, next, std::memory_order_acq_rel)) {
        if (next == waking) {
          self.owner->schedule(self.waiter);
          self.phase.store(done, std::memory_order_release);
        }
        break;
      }
    }
    self.release();
  }

  /// Moves `running` or `waiting` to `abandoned`; returns the phase it found.
  phase_t abandon() noexcept {
    phase_t before = phase.load(std::memory_order_acquire);
    while ((before == running || before == waiting) &&
           !phase.compare_exchange_weak(before, abandoned, std::memory_order_acq_rel)) {
    }
    return before;
  }
};

template <class F>
class [[nodiscard]] blocking_awaiter {
 public:
  using result_type = std::invoke_result_t<F&>;

  explicit blocking_awaiter(F fn) : call_(new blocking_call<F>(std::move(fn))) {}
  /// Movable until awaited (so it can be handed to with_timeout or when_any).
  blocking_awaiter(blocking_awaiter&& other) noexcept : call_(std::exchange(other.call_, nullptr)) {}
  blocking_awaiter& operator=(blocking_awaiter&&) = delete;
  ~blocking_awaiter() {
    if (call_ == nullptr) {
      return;
    }
    if (!submitted_) {
      delete call_;  // never awaited
      return;
    }
    stop_callback_.reset();  // waits for a cancel() in flight
    stop_counting();         // destroyed while parked (shutdown)
    if (call_->abandon() == blocking_call<F>::waking) {
      while (call_->phase.load(std::memory_order_acquire) == blocking_call<F>::waking) {
        std::this_thread::yield();  // the job is scheduling us: keep frame and executor alive
      }
    }
    call_->release();
  }

  bool await_ready() const {
    if (call_ == nullptr) {
      throw invalid_task("corio::spawn_blocking: awaiting a moved-from awaiter");
    }
    return false;
  }

  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> self) {
    blocking_pool* pool = current_blocking_pool();
    if (pool == nullptr) {
      throw std::logic_error("corio::spawn_blocking: no event loop or runtime runs on this thread");
    }
    stop_state* stop = stop_token_of(self);
    if (stop != nullptr && stop->stop_requested()) {
      cancelled_ = true;
      return yield_if_budget_spent(self);
    }
    call_->owner = current_executor;
    call_->waiter = self;
    if (!pool->submit({call_, &blocking_call<F>::run})) {
      throw runtime_stopped("corio::spawn_blocking: the runtime is shutting down");
    }
    submitted_ = true;
    if (stop != nullptr) {
      stop_callback_.emplace(*stop, on_stop{this});  // may run at once: it then finds `running`
    }
    promise_base* chain = chain_of(self);
    waiting_root_ = chain != nullptr ? chain->root_ : nullptr;
    if (waiting_root_ != nullptr) {
      waiting_root_->blocking_waits.fetch_add(1, std::memory_order_relaxed);
    }
    auto expected = blocking_call<F>::running;
    if (call_->phase.compare_exchange_strong(expected, blocking_call<F>::waiting, std::memory_order_acq_rel)) {
      return true;  // from here on the job or a cancellation may resume us: touch nothing
    }
    stop_counting();
    cancelled_ = expected == blocking_call<F>::abandoned;
    return yield_if_budget_spent(self);  // returned already, or cancelled while submitting
  }

  result_type await_resume() {
    stop_callback_.reset();
    stop_counting();
    if (cancelled_ || call_->phase.load(std::memory_order_acquire) == blocking_call<F>::abandoned) {
      throw cancelled();
    }
    return call_->result.take();
  }

 private:
  struct on_stop {
    blocking_awaiter* self;
    void operator()() const noexcept {
      blocking_call<F>& call = *self->call_;
      if (call.abandon() == blocking_call<F>::waiting) {
        call.owner->schedule(call.waiter);  // we took it out of `waiting`: nobody else will
      }
    }
  };

  // While parked, the awaiter counts in its chain's root (root_base::blocking_waits).
  void stop_counting() noexcept {
    if (waiting_root_ != nullptr) {
      waiting_root_->blocking_waits.fetch_sub(1, std::memory_order_relaxed);
      waiting_root_ = nullptr;
    }
  }

  blocking_call<F>* call_;
  root_base* waiting_root_ = nullptr;
  bool submitted_ = false;
  bool cancelled_ = false;
  std::optional<stop_callback<on_stop>> stop_callback_;
};

}  // namespace detail

/// Runs `fn` on the runtime's blocking thread pool (bounded by options::max_blocking_threads), or on
/// an event loop's (up to 64 threads, none until the first call), and completes with its result or
/// exception; the awaiting task resumes on a worker, or on the loop's thread. Use it for blocking
/// system calls and long computations so they never stall a worker. If the awaiting task is cancelled
/// (join_handle::cancel, with_timeout, when_any), the await completes at once with corio::cancelled
/// and the call, which cannot be interrupted, runs on detached: its result is discarded, and whatever
/// `fn` refers to in the awaiting frame may be gone by then, so capture by value. A loop's destructor
/// destroys the awaiting frames too (a loop cancels nothing; the calls run on, detached). A runtime's
/// shutdown and a loop's destructor wait for the calls running on a pool thread and drop, unrun,
/// those no thread has taken yet (a call awaited just before the loop's destruction may never run:
/// await its completion first where its side effect matters). The awaiter is movable until awaited.
/// Throws std::logic_error when awaited outside a runtime worker or an event loop's thread (sync_wait
/// on a plain thread), and corio::runtime_stopped during shutdown. It is lazy, like every corio
/// awaitable: `fn` starts when the awaiter is awaited, not when spawn_blocking returns (tokio's starts
/// at once); to run it beside the awaiting task, spawn a task that awaits it. With g++ 12, name a
/// capturing lambda (or the awaiter) before the co_await: a temporary in the awaited expression is
/// destroyed twice (README, Limitations).
///
///     std::string text = co_await corio::spawn_blocking([] { return read_file("big.txt"); });
///     co_await corio::with_timeout(50ms, corio::spawn_blocking(slow_call));   // returns after 50 ms
template <class F>
[[nodiscard]] detail::blocking_awaiter<F> spawn_blocking(F fn) {
  return detail::blocking_awaiter<F>(std::move(fn));
}

}  // namespace corio
