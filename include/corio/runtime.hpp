#pragma once
// corio::runtime: a multi-thread, work-stealing runtime for coroutines, and spawn_blocking.
#include <coroutine>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include <corio/detail/blocking_pool.hpp>
#include <corio/detail/executor.hpp>
#include <corio/detail/result_slot.hpp>
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
/// cooperative: a task that completes 128 operations without suspending is moved to the back of the
/// queue at its next co_await of a task; a loop with no co_await at all holds its worker (put such work
/// in spawn_blocking). Thread-safe: spawn(), block_on() (from non-runtime threads) and the destructor.
///
/// Destruction shuts down in numbered steps: stop accepting spawns; cancel every live task; run what
/// can run to its cancellation point (up to a 1 s grace); join the workers; wait for running
/// spawn_blocking calls; destroy every frame still alive.
///
///     corio::runtime rt;                                   // one worker per online CPU
///     int answer = rt.block_on([]() -> corio::task<int> {
///       auto h = corio::spawn(compute());                  // runs on any worker
///       co_return co_await std::move(h);
///     }());
class runtime {
 public:
  struct options {
    /// Worker threads; 0 means one per online CPU.
    std::size_t workers = 0;
    /// Upper bound on spawn_blocking threads.
    std::size_t max_blocking_threads = 64;
    /// Called (on a worker thread) with an exception that escaped a task nobody joins; by default it
    /// is printed to stderr.
    std::function<void(std::exception_ptr)> on_unhandled_exception = {};
    /// The reactor backend of every worker (see corio/io_backend.hpp); automatic by default.
    io_backend backend = io_backend::automatic;
  };

  runtime();
  explicit runtime(options opts);
  ~runtime();
  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;

  /// Runs `body` on the runtime and blocks the calling thread until it finishes; returns its value
  /// or rethrows its exception. Throws std::logic_error when called from a thread that runs an event
  /// loop or a runtime worker (that would block it; co_await the task instead), and
  /// corio::runtime_stopped after shutdown().
  template <class T>
  T block_on(task<T> body) {
    if (detail::current_executor != nullptr) {
      throw std::logic_error("corio::runtime::block_on: called on an event loop or runtime worker thread");
    }
    return sync_wait(spawn(std::move(body)));
  }

  /// Spawns `body` from any thread; it starts on some worker. Throws corio::runtime_stopped after
  /// shutdown() and corio::invalid_task for an empty task.
  template <class T>
  join_handle<T> spawn(task<T> body) {
    return detail::spawn_on(executor(), std::move(body));
  }

  /// Shuts the runtime down now (the steps above); idempotent. Throws std::logic_error if called from
  /// one of its own workers.
  void shutdown();

  /// The number of worker threads.
  std::size_t workers() const noexcept;

 private:
  detail::executor& executor() noexcept;

  std::unique_ptr<detail::scheduler> scheduler_;
};

namespace detail {

template <class F>
class blocking_awaiter {
 public:
  using result_type = std::invoke_result_t<F&>;

  explicit blocking_awaiter(F fn) : fn_(std::move(fn)) {}
  blocking_awaiter(const blocking_awaiter&) = delete;
  blocking_awaiter& operator=(const blocking_awaiter&) = delete;

  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> self) {
    blocking_pool* pool = current_blocking_pool();
    if (pool == nullptr) {
      throw std::logic_error("corio::spawn_blocking: not on a runtime worker thread");
    }
    owner_ = current_executor;
    waiter_ = self;
    if (!pool->submit({this, &run})) {
      throw runtime_stopped("corio::spawn_blocking: the runtime is shutting down");
    }
  }
  result_type await_resume() { return result_.take(); }

 private:
  static void run(void* context) noexcept {
    auto& self = *static_cast<blocking_awaiter*>(context);
    try {
      if constexpr (std::is_void_v<result_type>) {
        self.fn_();
      } else {
        self.result_.set_value(self.fn_());
      }
    } catch (...) {
      self.result_.set_exception(std::current_exception());
    }
    self.owner_->schedule(self.waiter_);
  }

  F fn_;
  result_slot<result_type> result_;
  executor* owner_ = nullptr;
  std::coroutine_handle<> waiter_;
};

}  // namespace detail

/// Runs `fn` on the runtime's blocking thread pool (bounded by options::max_blocking_threads) and
/// completes with its result or exception; the awaiting task resumes on a worker. Use it for blocking
/// system calls and long computations so they never stall a worker. The call itself cannot be
/// cancelled once started. Throws std::logic_error when awaited outside a runtime worker.
///
///     std::string text = co_await corio::spawn_blocking([] { return read_file("big.txt"); });
template <class F>
auto spawn_blocking(F fn) {
  return detail::blocking_awaiter<F>(std::move(fn));
}

}  // namespace corio
