#pragma once
// corio::event_loop: a single-threaded scheduler for coroutines, with a lock-free cross-thread post.
//
// Design note.
// Purpose: run coroutines and posted functors on one thread; let any thread hand work to it.
// Invariants:
//  - Only the thread inside run()/run_until_idle()/block_on() resumes this loop's coroutines, and only from the
//    local run queue. Other threads reach the loop through post() alone.
//  - Every coroutine spawned on the loop is a root in `roots_` until it finishes; destroying the loop
//    destroys every root frame still alive, and with it the chain of tasks each root awaits.
//  - A frame is owned by the executor it runs on. A spawned task that hops here (schedule_on) moves
//    its root record, and so the whole chain of tasks it awaits, from its old executor's registry to
//    this loop's before it is posted here; whichever executor is destroyed first destroys only what
//    it owns, and a joiner elsewhere is woken with corio::cancelled. The registry is locked, so roots
//    may arrive or finish from any thread.
// Threads: post(), spawn(), stop() and stopped() are thread-safe, as is the executor entry point awaitables
//   use to wake a coroutine parked here. Timers are armed on the loop's thread only. Everything else is for the loop's thread
//   (or any single thread before the first run()).
// Scheduling: run() alternates a batch of up to 64 ready coroutines with a batch of up to 1024 posted
//   functors, so neither can starve the other; when both are empty it parks on a
//   futex, and producers wake it only if it is actually parked (see detail/parker.hpp). Once the
//   loop has done I/O it parks in its reactor instead, and each round first reaps finished I/O without
//   blocking (detail/io_slot.hpp).
// Blocking calls: the loop owns a blocking pool as a runtime does (spawn_blocking, and resolve's
//   getaddrinfo), with no thread until the first call. A call that returns wakes its awaiter through
//   the loop's executor entry point, that is a post; one that returns after the loop was closed
//   finds the post refused.
// Shutdown (destructor), in order:
//   1. close the post queue, so post() returns false;
//   2. forget the ready queue (those handles belong to roots destroyed next);
//   3. cancel and reap every I/O operation in flight, so the kernel holds no pointer into a frame;
//   4. close the registry and destroy every root frame, newest first, which destroys the tasks each
//      awaits and wakes their joiners on other executors with corio::cancelled. A frame awaiting a
//      blocking call abandons it, as a cancelled awaiter does: the call runs on, detached;
//   5. destroy the posted functors that never ran, without running them;
//   6. shut the blocking pool down: calls no thread has taken are dropped, running ones waited for.
//   Frames and posts go before the pool, because what a running call waits for may be in them (the
//   sender of the channel it drains, in a frame parked anywhere, its own blocking call included, or
//   in a posted functor). Rejected: the runtime's order (frames that await a blocking call destroyed
//   only after the pool, so a call may use their locals). A runtime cancels its tasks first, so only
//   shielded calls keep their frames there; a loop cancels nothing, and with every awaiting frame
//   kept back, a call waiting for what another kept-back frame held never returned (two tasks of a
//   pipeline, each in a blocking call), and a child's call outlived the parent frame it was given.
#include <atomic>
#include <chrono>
#include <concepts>
#include <coroutine>
#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <type_traits>
#include <utility>

#include <corio/detail/blocking_pool.hpp>
#include <corio/detail/executor.hpp>
#include <corio/detail/io_slot.hpp>
#include <corio/detail/parker.hpp>
#include <corio/detail/post_queue.hpp>
#include <corio/detail/promise_base.hpp>
#include <corio/detail/root_registry.hpp>
#include <corio/detail/run_queue.hpp>
#include <corio/detail/task_factory.hpp>
#include <corio/detail/timer_queue.hpp>
#include <corio/errors.hpp>
#include <corio/io_backend.hpp>
#include <corio/join_handle.hpp>
#include <corio/sync_wait.hpp>
#include <corio/task.hpp>
#include <corio/yield.hpp>

namespace corio {

class event_loop;

namespace detail {

/// The loop running on this thread, or null. Set for the duration of run()/run_until_idle().
extern thread_local constinit event_loop* current_loop;

/// The blocking pool of the loop running on this thread, or null (current_blocking_pool's loop part).
blocking_pool* loop_blocking_pool() noexcept;

/// The first exception that escaped a task or functor of a loop, for run() to rethrow. Shared with
/// the loop's failure sink, which may outlive the loop (a join_handle detached late).
struct loop_errors {
  std::mutex mutex;
  std::exception_ptr first;  // guarded by mutex
  bool loop_alive = true;    // guarded by mutex; once false, failures are printed instead
};

// A hop is checked in await_suspend (errors that can be known at once throw there) and then only
// recorded in detail::pending_hop; the move of ownership and the post to the loop happen in
// resume_top, once the thread has left the chain (see executor.hpp). If the loop refuses it then, the
// coroutine is resumed where it was and await_resume throws.
struct schedule_on_awaiter {
  explicit schedule_on_awaiter(event_loop& target) noexcept : target_(target) {}

  event_loop& target_;
  promise_base* chain_ = nullptr;
  std::coroutine_handle<> handle_;
  bool refused_ = false;

  bool await_ready() const noexcept { return current_loop == &target_; }
  template <class Promise>
  void await_suspend(std::coroutine_handle<Promise> self);
  void await_resume() const;
};

}  // namespace detail

/// A single-threaded event loop.
///
///     corio::event_loop loop;
///     loop.spawn(serve());                       // serve() returns corio::task<>
///     std::thread producer([&] { loop.post([] { std::puts("runs on the loop thread"); }); });
///     loop.run_until_idle();
///     producer.join();
class event_loop final : private detail::executor {
 public:
  event_loop();
  /// A loop whose reactor uses `backend` for I/O (see corio/io_backend.hpp).
  explicit event_loop(io_backend backend);
  /// Destroys the tasks that never finished (a task awaiting a spawn_blocking call leaves the call
  /// running, detached, as a cancelled one does) and the functors that never ran, then waits for the
  /// calls running on its pool's threads to return and drops those not started (see "Shutdown").
  /// Must not run while another thread runs the loop, nor from one of the loop's own blocking calls:
  /// either aborts the process with a message. From one of the loop's own tasks it is only safe on
  /// the way out of the process (std::exit and a static loop).
  ~event_loop();
  event_loop(const event_loop&) = delete;
  event_loop& operator=(const event_loop&) = delete;

  /// Takes ownership of `body` and queues it to start on this loop. Thread-safe: from another thread
  /// the task reaches the loop through the post queue. An exception escaping `body` is rethrown from
  /// run()/run_until_idle().
  /// (corio::spawn, from a coroutine on the loop, returns a join_handle instead.)
  /// Throws corio::invalid_task for an empty task and corio::loop_stopped after stop().
  void spawn(task<void> body);

  /// Spawns the task `make()` returns, keeping the callable (a capturing lambda) alive in the task:
  /// `loop.spawn([conn]() -> corio::task<> { ... })` outlives the statement that spawned it.
  template <detail::task_factory F>
    requires std::same_as<std::invoke_result_t<std::decay_t<F>&>, task<void>>
  void spawn(F&& make) {
    spawn(detail::invoke_keeping(std::decay_t<F>(std::forward<F>(make))));
  }

  /// Runs until stop() is called, parking the thread whenever there is nothing to do. Rethrows the
  /// first exception that escaped a spawned task or a posted functor; the loop can be run again.
  /// Throws std::logic_error if the thread already runs a loop or is a runtime worker (a task there
  /// awaits instead), or if another thread runs this loop.
  void run();

  /// Runs the loop, as run() does, until `body` finishes; returns its value or rethrows its exception
  /// (a program's main task, as tokio's block_on on a current-thread runtime). Other tasks stay where
  /// they are, to go on in the next run() or block_on(). Throws std::logic_error as run() does,
  /// corio::loop_stopped if the loop is or gets stopped first (`body` is then destroyed with the
  /// loop), and what run() rethrows from other tasks.
  ///
  ///     corio::event_loop loop;
  ///     int answer = loop.block_on(compute());
  template <class T>
  T block_on(task<T> body) {
    // Spawned once this thread may run the loop (run_until's first step), so that a refused block_on
    // (inside a task, or while another thread runs the loop) leaves no task behind to run later.
    struct started {
      event_loop& loop;
      task<T> body;
      std::optional<join_handle<T>> handle;
    } state{*this, std::move(body), std::nullopt};
    run_until(
        [](void* context) {
          auto& self = *static_cast<started*>(context);
          self.handle.emplace(detail::spawn_on(self.loop, std::move(self.body)));
        },
        [](const void* context) { return static_cast<const started*>(context)->handle->is_finished(); }, &state);
    if (!state.handle->is_finished()) {
      throw loop_stopped("corio::event_loop::block_on: the loop was stopped before the task finished");
    }
    return sync_wait(std::move(*state.handle));
  }

  /// Runs the task `make()` returns, as above, keeping the callable alive inside it:
  /// `loop.block_on([&]() -> corio::task<int> { ... })`.
  template <detail::task_factory F>
  auto block_on(F&& make) {
    return block_on(detail::invoke_keeping(std::decay_t<F>(std::forward<F>(make))));
  }

  /// Runs until no coroutine is ready and no posted functor is waiting, then returns without parking.
  /// Coroutines suspended on other events (I/O, a timer, a spawn_blocking call) stay suspended.
  /// Errors as for run().
  void run_until_idle();

  /// Thread-safe. Makes run() return after its current step and after running every functor that
  /// post() had already accepted. From then on the loop is stopped for good: post() returns false and
  /// spawn() throws. A post() racing stop() either returns false or runs before run() returns (run()
  /// waits for posts in progress: as long as copying a functor takes). Coroutines still suspended
  /// are destroyed with the loop.
  void stop() noexcept;

  /// Thread-safe. True once stop() has been called.
  bool stopped() const noexcept { return posts_.closed(); }

  /// Thread-safe and lock-free. Queues `functor` to run on the loop thread, in FIFO order with the
  /// other functors posted by the calling thread (except posts from thread_local destructors at the
  /// thread's exit, once its post channels are gone: each of those goes alone, in no set order).
  /// Throws what copying or moving the functor throws, with nothing queued. Functors of up to 64
  /// bytes (aligned to at most 8) are stored in place (no allocation). Returns false, without taking
  /// the functor, if the loop is stopped. A functor that was accepted runs unless the loop is
  /// destroyed first, in which case it is destroyed unrun.
  /// An exception thrown by the functor propagates out of run().
  template <class F>
  bool post(F&& functor) {
    return posts_.push(std::forward<F>(functor));
  }

  /// Loop thread only: queues a suspended coroutine at the back of the run queue.
  void schedule_local(std::coroutine_handle<> handle) { ready_.push(handle); }

  /// The loop running on the calling thread, or null.
  static event_loop* current() noexcept { return detail::current_loop; }

 private:
  class running_scope;

  void schedule(std::coroutine_handle<> handle) noexcept override;
  void yield_current(std::coroutine_handle<> handle) override { ready_.push(handle); }
  void adopt(detail::root_base& root) override;
  void forget(detail::root_base& root) noexcept override { roots_.remove(root); }
  bool attach(detail::root_base& root) noexcept override;
  void report_unhandled(std::exception_ptr failure) noexcept override;
  std::shared_ptr<const detail::failure_sink> unhandled_sink() const noexcept override { return sink_; }

  friend struct detail::schedule_on_awaiter;
  friend void detail::complete_pending_hop() noexcept;
  friend detail::blocking_pool* detail::loop_blocking_pool() noexcept;
  void check_hop(const detail::promise_base* chain);
  bool accept_hop(detail::promise_base* chain, std::coroutine_handle<> handle) noexcept;
  bool move_and_post(detail::promise_base* chain, std::coroutine_handle<> handle) noexcept;

  /// run(), until `done(context)` (null: until stop()). `start(context)`, if not null, runs first, once
  /// the thread is allowed to run the loop.
  void run_until(void (*start)(void* context), bool (*done)(const void* context), void* context);
  std::size_t run_one_round();
  bool posts_arrive_soon() noexcept;
  void rethrow_pending_error();

  detail::run_queue ready_;
  std::shared_ptr<detail::parker> parker_ = std::make_shared<detail::parker>();  // shared with producers
  detail::io_slot io_;  // the reactor, created on the first I/O; its wait backs *parker_
  detail::post_queue posts_;
  detail::timer_queue timers_;  // the loop's thread only (current_timers while it runs)
  detail::root_registry roots_;
  std::shared_ptr<detail::loop_errors> errors_;
  std::shared_ptr<const detail::failure_sink> sink_;
  std::atomic<int> hops_in_flight_{0};  // schedule_on hops checked but not yet completed
  std::atomic<bool> running_{false};     // a thread is inside run(), run_until_idle() or block_on()
  detail::blocking_pool blocking_;        // spawn_blocking's threads, started by the first call
};

/// `co_await corio::schedule_on(loop)` moves the awaiting coroutine onto `loop`: it continues on that
/// loop's thread (at once if it is already there). Ownership moves with it: the spawned task it runs
/// for (with every task in its chain) now belongs to `loop`, so destroying its old executor no longer
/// touches it, and destroying `loop` destroys it (its joiner sees corio::cancelled). A chain that no
/// executor owns (sync_wait on a plain thread) must not outlive `loop`. Throws corio::loop_stopped if
/// `loop` is stopped (the coroutine then stays where it was), and std::logic_error inside an operand
/// of when_all/when_any (operands share their parent's executor and cannot move alone) or inside
/// with_timeout (its timer lives on the awaiting executor).
[[nodiscard]] inline detail::schedule_on_awaiter schedule_on(event_loop& loop) noexcept {
  return detail::schedule_on_awaiter{loop};
}

namespace detail {

template <class Promise>
void schedule_on_awaiter::await_suspend(std::coroutine_handle<Promise> self) {
  chain_ = chain_of(self);
  target_.check_hop(chain_);
  handle_ = self;
  pending_hop = this;
}

}  // namespace detail

}  // namespace corio
