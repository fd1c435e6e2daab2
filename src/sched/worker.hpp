#pragma once
// One runtime worker: a thread with a local run queue, a LIFO slot, and the loop that runs tasks,
// steals when idle and parks when there is nothing anywhere.
//
// Design note.
// Task order on a worker (Go's and tokio's, condensed):
//   1. every 61st tick: poll the reactor, fire due timers and take one task from the injection queue
//      first (fairness for work that arrives from outside); this runs inside chains too;
//   2. the chain slots: `lifo_`, the task this worker just woke, then `after_lifo_`, a task that spent
//      its cooperative budget while `lifo_` was full (a sender that woke its receiver and then filled
//      its budget resumes once that receiver has drained, as a Go sender does after `runnext`);
//   3. the local queue (FIFO);
//   4. a batch from the injection queue;
//   5. search: steal half of a random victim's queue, at most half the workers searching at once;
//   6. park (idle.hpp), with a timeout at this worker's earliest timer; with I/O in flight, first poll
//      the reactor for up to 50 us (spin_on_reactor): a peer that answers within that is caught awake.
//      The spin is shorter, down to a single poll, while the waits before it showed that peers answer
//      later than that (spin_budget.hpp).
// Chains: the run of tasks taken from the slots without a step 3-5 task between them. Its clock
//   starts at its first slot task and is read once per slot task (chain_clock.hpp: rdtsc where it is
//   invariant, else steady_clock). Once a chain has run for chain_bound, both slots go to the queue's
//   back (lifo_ first, so a receiver stays ahead of its sender), where other workers may steal them,
//   and the next task comes from step 3. So a pair that ping-pongs (a woken receiver, a sender that
//   yields behind it) runs up to chain_bound with a hot cache instead of 128 events per visit, and
//   two tasks waking each other forever still let everything queued run every chain_bound.
// chain_bound is 1 ms: at some tens of nanoseconds an event, a pair sends thousands of events per
//   chain (the lab's chan pairs, 10,000 events each, finish in a few chains instead of ~80 visits),
//   while a queued task waits at most one chain (plus the task that ends it) per task ahead of it, a
//   tenth of what Go's 10 ms time slice allows. No count cap: a clock that went backwards reads as a
//   huge interval (unsigned subtraction), which ends the chain, so the bound holds without one.
// Budget yields vs yields: `yield_current` (corio::yield) always goes to the queue's back;
//   `yield_for_budget` (the cooperative budget) goes to after_lifo_ only if lifo_ holds a task and
//   after_lifo_ is empty, else to the back. A task looping alone on ready operations therefore still
//   lets the whole queue run after each budget.
// Rejected alternatives: tokio's "at most 3 LIFO tasks in a row" (a bounded-channel pair moves ~128
//   events per visit, then every frame and ring is cold again behind ~20,000 tasks); putting the
//   budget-yielded task in lifo_ itself (it would displace the receiver it just woke, or run before it
//   with a full channel); a count cap instead of a time bound (a hand-off carries one event in a
//   rendezvous ping-pong and 128 in a buffered pair, so no count is right for both).
// Timers: each worker owns a timer_queue (detail/timer_queue.hpp) that only its thread touches; a
//   timer armed by a task running here goes into it, and fires here (due timers are fired on every
//   maintenance tick and whenever the queues run dry). A parked worker wakes by its own reactor or futex
//   timeout when its earliest deadline passes, whatever the other workers do.
// Invariants: only this worker's thread touches the slots, the chain state, the counters and the push
//   side of queue_. The slots are not stealable; filling one therefore does not wake a sleeping
//   worker. after_lifo_ is filled only while lifo_ is, and is taken only after lifo_. Both slots are
//   empty whenever next_task returns nothing (it ran or queued them), so a worker never searches or
//   parks with a task in a slot.
// I/O: the worker's reactor (io_slot.hpp) is its idle wait once the thread has done I/O; the worker
//   also reaps it without blocking on a maintenance tick unless a park reaped it since the previous
//   tick or the tasks its last reap delivered have not all had their turn (io_slot::maintain), so a
//   busy worker still sees completions, in batches. A reap takes no more
//   completions than the local queue has room for (io_slot.hpp, "Reap bound"), and a batch from the
//   injection queue no more than that room plus the task it runs: neither overflows the queue back
//   into the injection queue by itself. Operations other threads handed over and cancel requests
//   delivered in the same turn come on top of the bound, so such a turn can overflow into the
//   injection queue: a cost (other workers may take them), nothing lost. A maintenance reap takes at
//   least min_reap even from a full queue, so tasks that keep the queue full (yielding, or waking
//   each other) cannot hold I/O back.
// The local queue holds 256 tasks, as Go's and tokio's do. Its room bounds a reap, so it also bounds
//   how many completions one turn takes from the kernel. At 300 busy echo connections a one-worker
//   io_uring server then enters the kernel about twice as often as the plain liburing server, and
//   more of its receives find no data yet and arm a poll (perf stat, 3 s at 300 x 512 B: 80 K poll
//   arms against 11 K). 1024 brought both counts level with the C server's, but requests/s did not
//   follow reproducibly on the 2-core lab VM: +4.5% in one series of alternating runs, level in a
//   later one, and 1-3% lower at 500 x 128 B. So it stays at 256.
// The local queue's pop: a CAS on its head, which thieves move too; the only worker of a runtime has
//   no thieves and pops with a plain store (one locked instruction fewer per task).
// Shutdown: when the scheduler is draining, a worker that finds no work (or passes the drain deadline)
//   leaves its loop instead of parking, unless operations are still in flight in its reactor, or
//   handed to it by other workers: those belong to tasks the drain cancelled, whose cancel requests
//   are queued for the reactor (a handed-off op's once the reactor takes it), so it waits
//   in the reactor (1 ms at a time, until the deadline) and their tasks resume with corio::cancelled
//   and run their handlers, as tasks woken from a timer or a channel do. (It used to leave at once, and
//   such a task was destroyed suspended.) Then it cancels and reaps its reactor's operations on its own
//   thread (io_uring SINGLE_ISSUER) before the scheduler destroys any frame. Handles left in the
//   slots or the queue past the deadline are dropped unrun, like the queue's: each belongs to a root
//   frame, which the scheduler destroys exactly once (scheduler.hpp, step 6).
#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <span>

#include <corio/detail/io_slot.hpp>
#include <corio/detail/parker.hpp>
#include <corio/detail/spin_budget.hpp>
#include <corio/detail/timer_queue.hpp>
#include <corio/detail/ws_queue.hpp>

#include "chain_clock.hpp"

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

  /// This worker's thread only: `handle` spent its cooperative budget. It goes behind the LIFO slot's
  /// task if that slot is full and after_lifo_ is empty, else to the queue's back.
  void push_budget_yield(std::coroutine_handle<> handle);

  /// This worker's thread only. Queues `handles` at the back (not the LIFO slot), then notifies once.
  void push_batch(std::span<const std::coroutine_handle<>> handles);

  /// Any thread: whether the local queue holds stealable work.
  /// This worker's reactor slot; the scheduler lists it among its siblings' before any worker runs.
  io_slot& io() noexcept { return io_; }
  bool has_queued_work() const noexcept { return !queue_.empty(); }

  /// Any thread: steal half of this worker's queue into `out`; returns how many.
  std::size_t steal_half(void** out) noexcept { return queue_.steal_half(out); }

  /// Any thread: wake this worker (leaves a permit). Whoever picked it recorded why in idle_workers.
  void unpark() noexcept { parker_.unpark(); }

  std::size_t index() const noexcept { return index_; }
  scheduler& owner() const noexcept { return owner_; }

 private:
  std::coroutine_handle<> next_task();
  void* pop_local() noexcept { return alone_ ? queue_.pop_unshared() : queue_.pop(); }
  std::coroutine_handle<> next_in_chain();
  std::coroutine_handle<> take_from_inject();
  std::coroutine_handle<> search();
  void stop_searching();
  bool spin_on_reactor(std::chrono::nanoseconds length);
  void park();
  void sleep();  // park() after the spin: on the sleeper list, in the parker until woken or a timer is due
  void leave_sleep();
  void push_back(std::coroutine_handle<> handle);
  void push_back_and_notify(std::coroutine_handle<> handle);
  void overflow_to_inject(std::coroutine_handle<> handle);
  /// This worker's thread: free places in the local queue (a steal meanwhile only adds room).
  std::size_t queue_room() const noexcept { return queue_capacity - queue_.size(); }
  bool fire_due_timers();
  std::size_t random_below(std::size_t bound) noexcept;

  scheduler& owner_;
  const std::size_t index_;
  ws_queue<queue_capacity> queue_;
  parker parker_;
  io_slot io_;  // this thread's reactor, created on its first I/O; its wait backs parker_
  timer_queue timers_;  // this thread only
  std::coroutine_handle<> lifo_;        // woken by the task running here; runs next
  std::coroutine_handle<> after_lifo_;  // spent its budget while lifo_ was full; runs after lifo_
  chain_clock chain_clock_;
  spin_budget spin_;  // how long the next spin_on_reactor may poll
  std::uint64_t chain_start_ = 0;  // chain_clock_ ticks at the current chain's first slot task
  bool in_chain_ = false;
  std::uint64_t until_maintenance_;  // ticks left before the next maintenance tick (a division fewer per task)
  bool alone_ = false;  // the runtime's only worker: nobody steals from queue_ (pop_unshared)
  bool searching_ = false;
  bool in_park_ = false;     // inside parker_.park_unless_notified: its reactor may reap into our queue
  bool left_sleep_ = false;  // push_batch already took us off the sleeper list during this park
  std::uint32_t random_state_;
};

/// The worker running on this thread, or null.
extern thread_local constinit worker* current_worker;

}  // namespace corio::detail
