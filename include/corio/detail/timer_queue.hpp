#pragma once
// The deadlines one thread acts on: each event loop and each runtime worker owns a timer_queue that
// only its own thread touches, with no lock.
//
// Design note.
// Purpose: sleep_for, select's after() and with_timeout arm a timer from a coroutine running on some
//   loop or worker W; the timer goes into W's queue (current_timers), W fires it and parks no longer
//   than its own earliest deadline. The common case is a deadline that never fires (a read re-armed
//   under a 30 s timeout, cancelled when the read wins), so arm and disarm on the owning thread cost no
//   atomic read-modify-write, no lock and, once warm, no allocation.
// Two orders: an entry whose deadline is no earlier than the last listed one is appended to a doubly
//   linked list (O(1) arm and disarm: a stream of equal timeouts arrives in deadline order); any other
//   goes into a binary min-heap (O(log n)). The earliest deadline is the earlier of the list's head
//   and the heap's top.
// Entries: list and heap hold `timer_entry` records from the queue's own slab (chunks that live as
//   long as the queue), not the awaiters. A `timer` (embedded in an awaiter) points at its entry. So a
//   timer disarmed on another thread (its coroutine was stolen, or resumed on the worker that completed
//   its operand) need not reach into W's queue: it marks the entry cancelled and forgets it, W drops
//   the entry when it pops it (Go's timerDeleted), and W's queue never points into a freed frame.
// Entry states (one atomic byte):
//   armed --owner pops it, CAS--> firing --callback returns--> fired --holder disarms--> free
//   armed --holder on another thread, CAS--> cancelled --owner pops it (or compacts)--> free
//   armed --holder on the owning thread--> free (unlinked at once, no atomics)
// Invariants:
//  - only the owning thread (current_timers == this) touches the heap, the list, the slab's free list,
//    and an entry's deadline, position and links; a holder's only cross-thread writes are the
//    armed->cancelled CAS and the push of a fired entry onto `returned_`;
//  - a timer is armed iff it holds an entry; it is disarmed exactly once per arm, by its holder;
//  - the callback runs on the owning thread, between `firing` and `fired`; a holder that loses the
//    CAS waits for `fired`, so once disarm() returns no callback for it runs or will run and its
//    awaiter may go. Callbacks are short (settle a state, schedule a coroutine, request a stop) and
//    never disarm their own timer;
//  - an entry is reused only after both sides let go of it: the queue (pop, removal) and the holder
//    (disarm). A fired entry goes back by its holder, a cancelled one by the owner;
//  - remote cancellations leave entries in the queue until their deadline; once they are more than a
//    quarter of it the owner drops them all in one pass (compact), so memory stays proportional to
//    the live timers however long the deadlines.
// Memory order: the holder's CAS armed->cancelled and the owner's CAS armed->firing are acq_rel (one
//   wins); the owner's release store of `fired` pairs with the remote holder's acquire spin, so what
//   the callback wrote is visible to the holder; `returned_` is a Treiber stack pushed with release,
//   taken whole by the owner with acquire. `remote_cancels_` is a relaxed counter (a hint for compact).
// Threads: timer::arm on the owning thread; timer::disarm on any thread; every timer_queue member on
//   the owning thread. Arming never happens elsewhere, so no other thread ever needs to wake the owner
//   to re-arm its wait: a parked owner has no new deadline to learn.
// Shutdown: frames suspended on a timer are destroyed by their executor's shutdown, after its threads
//   stopped, and their awaiters disarm (cancelled, left in the queue); the queue is destroyed after the
//   frames and frees its slab. No entry is freed twice: the slab owns every entry.
// Limitation: a worker busy inside one long task fires its timers when the task next suspends, as it
//   reaps its I/O then: timers are per thread like the reactor (long computation belongs in
//   spawn_blocking).
// Rejected: one mutex-protected heap per executor (every parked worker waited on the same earliest
//   deadline, and each arm and disarm took the lock); the heap alone (the read that wins cancels the
//   oldest deadline, near the top: a sift-down per request, ~170 instructions at 50 connections); a
//   hierarchical wheel (O(1) too, but coarser, with cascades, and more code than the list); timers
//   linked into the queue themselves (a disarm from another thread would have to wait for the owner to
//   unlink them before the frame may go); firing another worker's overdue timers (Go's timer
//   stealing: a lock on every arm).
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace corio::detail {

class timer_queue;

/// The calling thread's timers (its event loop's or runtime worker's), or null on a plain thread.
extern thread_local constinit timer_queue* current_timers;

/// One deadline, embedded in the awaiter that waits for it. Not copyable or movable once armed.
class timer {
 public:
  using clock = std::chrono::steady_clock;
  using callback = void (*)(timer&) noexcept;

  timer(clock::time_point deadline, callback fire) noexcept : deadline_(deadline), fire_(fire) {}
  timer(const timer&) = delete;
  timer& operator=(const timer&) = delete;
  ~timer() = default;  // the owner disarms first (its callback may touch the derived object)

  clock::time_point deadline() const noexcept { return deadline_; }
  bool armed() const noexcept { return entry_ != nullptr; }

  /// Owning thread: arms this timer in current_timers; its callback runs there once the deadline
  /// passes, unless disarmed first. Throws std::logic_error on a thread without timers, or
  /// std::bad_alloc when the queue must grow.
  void arm();

  /// Any thread, once per arm(). True if the callback never ran and never will; false if it ran (it
  /// has returned by the time disarm() does).
  bool disarm() noexcept;

 private:
  friend class timer_queue;
  clock::time_point deadline_;
  callback fire_;
  struct timer_entry* entry_ = nullptr;
  timer_queue* home_ = nullptr;
};

/// A timer_queue's record of one armed timer (see the entry states above).
struct timer_entry {
  enum : std::uint8_t { free, armed, cancelled, firing, fired };
  std::atomic<std::uint8_t> state{free};
  timer* holder = nullptr;
  std::int64_t deadline_ns = 0;
  std::size_t index = 0;        // heap position, or the list's mark
  timer_entry* next = nullptr;  // the list, the free list, or the returned_ stack
  timer_entry* prev = nullptr;  // the list
};

class timer_queue {
 public:
  using clock = timer::clock;

  timer_queue() = default;
  timer_queue(const timer_queue&) = delete;
  timer_queue& operator=(const timer_queue&) = delete;

  /// Fires every timer due now, earliest first; returns how many fired. Reads no clock when empty.
  std::size_t fire_due() noexcept;
  /// How long until the earliest deadline (zero or negative if it passed), or nothing.
  std::optional<clock::duration> time_until_earliest() const noexcept;
  bool empty() const noexcept { return heap_.empty() && head_ == nullptr; }
  /// Entries held, counting those cancelled from another thread and not yet dropped.
  std::size_t size() const noexcept { return heap_.size() + listed_; }

 private:
  friend class timer;
  struct slot {
    std::int64_t deadline_ns;
    timer_entry* what;
  };
  static constexpr std::size_t chunk_size = 256;

  timer_entry& add(timer& holder);
  void remove(timer_entry& e) noexcept;
  void recycle(timer_entry& e) noexcept;
  void give_back(timer_entry& e) noexcept;
  void note_remote_cancel() noexcept { remote_cancels_.fetch_add(1, std::memory_order_relaxed); }
  timer_entry& allocate();
  void append(timer_entry& e) noexcept;
  void unlink(timer_entry& e) noexcept;
  timer_entry* earliest() const noexcept;
  void take(timer_entry& e) noexcept;
  void compact() noexcept;
  void sift_up(std::size_t index) noexcept;
  void sift_down(std::size_t index) noexcept;
  void place(std::size_t index, slot s) noexcept;
  void pop_front() noexcept;

  std::vector<slot> heap_;
  timer_entry* head_ = nullptr;  // the list: deadlines in arming order, each no earlier than the last
  timer_entry* tail_ = nullptr;
  std::size_t listed_ = 0;
  std::vector<std::unique_ptr<timer_entry[]>> chunks_;
  timer_entry* free_ = nullptr;
  std::atomic<timer_entry*> returned_{nullptr};
  std::atomic<std::int64_t> remote_cancels_{0};  // may dip below zero for a moment: a hint only
};

}  // namespace corio::detail
