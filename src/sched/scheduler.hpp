#pragma once
// The multi-thread runtime's shared state: the executor every worker serves, the injection queue,
// the idle-worker protocol, the registry of live roots, and shutdown.
//
// Design note.
// Waking: schedule(h) from a worker of this runtime puts h in that worker's LIFO slot; from any other
//   thread it goes to the injection queue and a sleeping worker is woken if nobody is searching.
//   New tasks (adopt) and yields go to the back of the local queue (stealable), then notify. A
//   budget yield goes behind the worker's LIFO task when there is one (worker.hpp, chains).
// Registry: one root_registry shard per worker plus one for foreign threads, so spawning from
//   different workers does not contend on one lock (tokio shards its owned-task list the same way).
// Shutdown (shutdown(), also run by ~runtime), in order:
//   1. stop accepting work: close every registry shard, so adopt() throws corio::runtime_stopped (the
//      close and a racing spawn's registration take the same lock: a spawn is either refused or
//      registered before the close, and then cancelled and destroyed by the steps below);
//   2. request cancellation of every live root; their stop callbacks wake what is cancellable;
//   3. drain: wake every worker; each runs what it finds, fires its timers and reaps its I/O, and
//      leaves its loop once every task has finished and its reactor holds no operation, or after a
//      1 s grace period (so a task that ignores cancellation cannot hold shutdown forever). Until
//      then a cancelled task's cleanup may wait, under corio::shield, for a timer, a channel or a
//      socket alike. (Rejected: leaving once nothing is runnable and no I/O is in flight, which
//      destroyed a shielded sleep or channel receive at once and gave a socket's the grace period.)
//   4. join the worker threads;
//   5. destroy every root frame still registered that waits for no blocking call (root_base::
//      blocking_waits), with the tasks it awaits, newest first across all shards (a child before the
//      parent whose frame may hold what it waits on); their joiners on other executors are woken with
//      corio::cancelled. Such a frame may hold what a blocking call waits for (the receiver of the
//      channel a send_blocking fills), and nothing on the pool refers to it: a blocking call whose
//      awaiter was cancelled runs detached;
//   6. shut the blocking pool down (waits for running blocking calls to return);
//   7. drop queued handles and destroy the frames left, those that waited for a blocking call (a
//      shielded spawn_blocking, whose call may use the frame's locals until it returns), newest first.
// A task that swallows corio::cancelled and loops on co_await cannot hold step 3 past the grace period:
//   every awaitable that completes without suspending spends the cooperative budget, so the task
//   returns to its worker at least every 128 such awaits, and the worker checks the deadline there.
// Threads: everything here is thread-safe; shutdown() must not run on a worker, and a second call
//   made while the first runs waits for it (shutdown_mutex_) and then returns; one made from inside
//   it, on its own thread (a frame destroyed in step 5 or 7), returns at once.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <corio/detail/blocking_pool.hpp>
#include <corio/detail/executor.hpp>
#include <corio/detail/root_registry.hpp>
#include <corio/io_backend.hpp>

#include "idle.hpp"
#include "inject_queue.hpp"
#include "worker.hpp"

namespace corio::detail {

struct scheduler_options {
  std::size_t workers;
  std::size_t max_blocking_threads;
  std::function<void(std::exception_ptr)> on_unhandled_exception;
  io_backend backend = io_backend::automatic;
};

class scheduler final : public executor {
 public:
  explicit scheduler(scheduler_options options);
  ~scheduler();
  scheduler(const scheduler&) = delete;
  scheduler& operator=(const scheduler&) = delete;

  void shutdown();

  // executor
  void schedule(std::coroutine_handle<> handle) noexcept override;
  void schedule_batch(std::span<const std::coroutine_handle<>> handles) noexcept override;
  void yield_current(std::coroutine_handle<> handle) override;
  void yield_for_budget(std::coroutine_handle<> handle) override;
  void adopt(root_base& root) override;
  void forget(root_base& root) noexcept override;
  bool attach(root_base& root) noexcept override;
  void report_unhandled(std::exception_ptr failure) noexcept override;
  std::shared_ptr<const failure_sink> unhandled_sink() const noexcept override { return sink_; }

  // For workers.
  std::size_t worker_count() const noexcept { return workers_.size(); }
  worker& worker_at(std::size_t index) noexcept { return *workers_[index]; }
  inject_queue& inject() noexcept { return inject_; }
  idle_workers& idle() noexcept { return idle_; }
  blocking_pool& blocking() noexcept { return blocking_; }
  /// After stealable work was published: wake a sleeping worker if nobody is searching.
  void notify_work() noexcept;
  /// Seq_cst re-check used before parking: any stealable work anywhere?
  bool work_visible() const noexcept;
  bool draining() const noexcept { return draining_.load(std::memory_order_seq_cst); }
  bool drain_deadline_passed() const noexcept;
  /// During the drain: whether a task of this runtime has not finished yet (a registry holds it).
  bool tasks_unfinished();

 private:
  /// This thread's worker if it is one of ours, else null.
  worker* local_worker() const noexcept;
  unsigned local_shard() const noexcept;
  void inject_and_notify(std::coroutine_handle<> handle);
  void wake_all_sleepers() noexcept;

  inject_queue inject_;
  idle_workers idle_;
  blocking_pool blocking_;
  std::vector<std::unique_ptr<worker>> workers_;
  std::vector<io_slot*> io_slots_;  // each worker's, in worker order
  std::vector<std::thread> threads_;
  std::vector<root_registry> registries_;  // one per worker, then one for foreign threads
  std::shared_ptr<const failure_sink> sink_;
  std::atomic<bool> draining_{false};
  std::atomic<std::int64_t> drain_deadline_ns_{0};
  std::mutex shutdown_mutex_;  // held through a shutdown: a concurrent one waits, then finds shut_down_
  bool shut_down_ = false;     // shutdown_mutex_
};

}  // namespace corio::detail
