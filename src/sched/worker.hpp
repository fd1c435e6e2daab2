#pragma once
// One runtime worker: a thread with a local run queue, a LIFO slot, and the loop that runs tasks,
// steals when idle and parks when there is nothing anywhere.
//
// Design note.
// Task order on a worker (Go's and tokio's, condensed):
//   1. every 61st tick: fire due timers and take one task from the injection queue first (fairness
//      for work that arrives from outside);
//   2. the LIFO slot: the task this worker just woke runs next (a sender and the receiver it wakes run
//      back to back on one core); at most 3 in a row, then the slot's task goes to the queue's back so
//      two tasks waking each other cannot starve the rest;
//   3. the local queue (FIFO);
//   4. a batch from the injection queue;
//   5. search: steal half of a random victim's queue, at most half the workers searching at once;
//   6. park (idle.hpp), with a timeout at this worker's earliest timer.
// Timers: each worker owns a timer_queue (detail/timer_queue.hpp) that only its thread touches; a
//   timer armed by a task running here goes into it, and fires here (due timers are fired on every
//   maintenance tick and whenever the queues run dry). A parked worker wakes by its own reactor or futex
//   timeout when its earliest deadline passes, whatever the other workers do.
// Invariants: only this worker's thread touches lifo_, the counters and push side of queue_. The LIFO
//   slot is not stealable; waking into it therefore does not wake a sleeping worker.
// I/O: the worker's reactor (io_slot.hpp) is its idle wait once the thread has done I/O; the worker
//   also reaps it without blocking on every maintenance tick, so a busy worker still sees completions.
// Shutdown: when the scheduler is draining, a worker that finds no work (or passes the drain deadline)
//   leaves its loop instead of parking, then cancels and reaps its reactor's operations on its own
//   thread (io_uring SINGLE_ISSUER) before the scheduler destroys any frame.
#include <atomic>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <span>

#include <corio/detail/io_slot.hpp>
#include <corio/detail/parker.hpp>
#include <corio/detail/timer_queue.hpp>
#include <corio/detail/ws_queue.hpp>

namespace corio::detail {

class scheduler;

class worker {
 public:
  static constexpr std::size_t queue_capacity = 256;

  worker(scheduler& owner, std::size_t index, io_backend backend) noexcept;

  /// The thread body.
  void run();

  /// This worker's thread only. `woken` tasks go to the LIFO slot, others to the queue's back.
  void push(std::coroutine_handle<> handle, bool woken);

  /// This worker's thread only. Queues `handles` at the back (not the LIFO slot), then notifies once.
  void push_batch(std::span<const std::coroutine_handle<>> handles);

  /// Any thread: whether the local queue holds stealable work.
  bool has_queued_work() const noexcept { return !queue_.empty(); }

  /// Any thread: steal half of this worker's queue into `out`; returns how many.
  std::size_t steal_half(void** out) noexcept { return queue_.steal_half(out); }

  /// Any thread: wake this worker (leaves a permit). Whoever picked it recorded why in idle_workers.
  void unpark() noexcept { parker_.unpark(); }

  std::size_t index() const noexcept { return index_; }
  scheduler& owner() const noexcept { return owner_; }

 private:
  std::coroutine_handle<> next_task();
  std::coroutine_handle<> take_from_inject();
  std::coroutine_handle<> search();
  void stop_searching();
  void park();
  void leave_sleep();
  void push_back(std::coroutine_handle<> handle);
  void push_back_and_notify(std::coroutine_handle<> handle);
  void overflow_to_inject(std::coroutine_handle<> handle);
  bool fire_due_timers();
  std::size_t random_below(std::size_t bound) noexcept;

  scheduler& owner_;
  const std::size_t index_;
  ws_queue<queue_capacity> queue_;
  parker parker_;
  io_slot io_;  // this thread's reactor, created on its first I/O; its wait backs parker_
  timer_queue timers_;  // this thread only
  std::coroutine_handle<> lifo_;
  unsigned lifo_streak_ = 0;
  std::uint64_t tick_ = 0;
  bool searching_ = false;
  bool in_park_ = false;     // inside parker_.park_unless_notified: its reactor may reap into our queue
  bool left_sleep_ = false;  // push_batch already took us off the sleeper list during this park
  std::uint32_t random_state_;
};

/// The worker running on this thread, or null.
extern thread_local constinit worker* current_worker;

}  // namespace corio::detail
