#pragma once
// The pool of threads for blocking calls (spawn_blocking) that a runtime, and each event loop, owns,
// kept apart from the workers (or the loop's thread) so that a blocking call never stalls them.
//
// Design note.
// Invariants: at most `max_threads` threads exist; a thread is started only when a job arrives and no
//   thread is idle and unclaimed (see "Idle"); an idle thread exits after `keep_alive`. Jobs run in
//   FIFO order.
// A job is two words (context, function); the function is told whether to run the call or only to
// finish it unrun (a job dropped at shutdown), so whoever owns the context can always free it.
// Idle: `idle_` counts the waiting threads no submit has woken yet. A submit that finds one takes it
//   off the count at once (and counts the wake-up in `notified_`), so jobs submitted before it wakes
//   start threads of their own instead of queueing behind it; a woken thread takes its wake-up off
//   `notified_`, one that woke by itself (its keep-alive, a spurious wake-up) itself off `idle_`.
//   Which thread the notification woke does not matter: only the counts must add up.
// Threads: submit() from any thread; shutdown() from the thread destroying the runtime or the loop.
// Shutdown: 1. refuse new jobs; 2. finish the jobs not yet started without running them (their
//   awaiters, if still alive, complete with corio::cancelled; their frames are destroyed by the
//   owner's shutdown: a runtime's after this step, a loop's before it); 3. wait for running jobs to
//   return; 4. join threads.
//   A job that never returns makes shutdown wait forever, as in tokio.
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace corio::detail {

/// A runtime's default bound on its blocking threads (runtime::options), and an event loop's bound.
inline constexpr std::size_t default_blocking_threads = 64;
/// How long an idle blocking thread waits for a job before it exits.
inline constexpr std::chrono::milliseconds blocking_keep_alive{10'000};

class blocking_pool {
 public:
  struct job {
    void* context;
    /// `execute` false: the job was dropped unrun (shutdown) and must only release what it holds.
    void (*run)(void* context, bool execute) noexcept;
  };

  blocking_pool(std::size_t max_threads, std::chrono::milliseconds keep_alive);
  ~blocking_pool();
  blocking_pool(const blocking_pool&) = delete;
  blocking_pool& operator=(const blocking_pool&) = delete;

  /// Queues `work`; false if the pool is shut down. Throws std::system_error, with `work` not queued,
  /// if no thread runs and none can be started (then nothing would ever run or finish it).
  bool submit(job work);
  void shutdown() noexcept;

  /// Thread-safe; for tests and diagnostics.
  std::size_t thread_count() const;
  /// Whether the calling thread is one of this pool's (a call running on it).
  bool runs_this_thread() const noexcept;

 private:
  void thread_main();

  const std::size_t max_threads_;
  const std::chrono::milliseconds keep_alive_;
  mutable std::mutex mutex_;
  std::condition_variable work_ready_;
  std::deque<job> jobs_;
  std::vector<std::thread> threads_;
  std::vector<std::thread::id> exited_;  // threads that left on keep-alive, to be joined
  std::size_t live_ = 0;
  std::size_t idle_ = 0;      // waiting, not yet woken by a submit (see "Idle")
  std::size_t notified_ = 0;  // wake-ups sent and not yet taken by a woken thread
  bool stopping_ = false;
};

}  // namespace corio::detail
