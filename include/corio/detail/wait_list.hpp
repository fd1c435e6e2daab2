#pragma once
// The waiter list every corio sync primitive parks coroutines on (async_mutex, semaphore, event,
// auto_reset_event, wait_group, latch, condition_variable): one intrusive FIFO and one cancellable
// awaiter, instead of one copy of the same races per primitive.
//
// Design note.
// Purpose: park a coroutine on a primitive without allocating, wake it through the executor it
//   suspended on, and let its task's cancellation take it off the list, with a grant and a
//   cancellation racing on different threads and exactly one of them winning.
// Structure: a primitive owns one wait_list. The list's spin_lock guards the list *and* the
//   primitive's own state (locked flag, permit count, ...), so "take it if free, else enqueue" and
//   "hand it to the oldest waiter" are each one critical section. The waiter node is the awaiter,
//   which lives in the suspended coroutine's frame: no allocation per wait.
// Waiter states (changed only under the list's lock):
//   idle --try_now succeeds--> granted            (completes without suspending)
//   idle --linked--> waiting --woken--> granted   (a waker unlinked it; what it waited for is its own)
//                    waiting --stop--> cancelled  (its stop callback unlinked it; it owns nothing)
//   idle --stop--> cancelled                      (stop arrived while it was registering; the
//                                                  suspending thread sees this and does not suspend)
// Invariants:
//  - a waiter is linked iff its state is `waiting`; only a transition out of `waiting` resumes the
//    coroutine, and both such transitions happen under the lock, so it is resumed exactly once;
//  - a waker never touches the primitive after releasing its lock, and a woken waiter never touches
//    it again either (except to pass on a grant it will not use). So a primitive may be destroyed as
//    soon as its last waiter was woken, even while the waker is still returning from set()/done():
//    the common `wait_group wg; ...; co_await wg.wait();` with `wg` in the waiter's own frame;
//  - under the lock a waker only unlinks the waiter, decides its state and marks it `in_hand_`; after
//    unlocking it reads the waiter's executor and handle, schedules it, and only then clears
//    `in_hand_` (release). The resumed waiter, and an awaiter destructor running because a shutdown
//    destroys the frame, wait (acquire) until `in_hand_` is clear before the frame may go. So the node
//    stays valid while the waker reads it, and the executor stays alive (its shutdown is blocked in
//    that destructor) while the waker schedules on it. The cost: a waiter resumed on another thread
//    while its waker is still inside schedule() (say, in the futex wake) spins until it returns.
//    A waiter on a plain thread (no executor) is released first, then resumed inline by the waker;
//  - the outcome is decided when the coroutine resumes: if its task's stop was requested by then, the
//    wait throws corio::cancelled, and a grant that arrived meanwhile is given back first (the lock
//    to the next waiter, the permit to the semaphore). So a cancelled wait never owns anything, and a
//    grant is never lost.
// A frame destroyed while it waits (an executor's shutdown), in its awaiter's destructor:
//   1. remove the stop callback (waiting for one in flight on another thread);
//   2. under the lock, unlink the waiter if it is still waiting;
//   3. wait until no waker holds it (`in_hand_` clear);
//   4. if it had been granted something it never resumed to use, give it back to the primitive.
//   The primitive must therefore outlive every frame that waits on it.
// Threads: wait_list members require its lock; any thread may take it. Nothing is resumed or
//   scheduled under the lock: wakers collect waiters in a wake_batch, which wakes them after the
//   lock is released (executor::schedule, which never resumes inline; or inline on a plain thread).
// Memory order: spin_lock::lock is an acquire exchange and unlock a release store, so everything
//   written under the lock (links, states, the primitive's counters) is visible to the next holder.
//   What the waker wrote reaches the resumed coroutine through executor::schedule (a release/acquire
//   post, or a push on the same thread); `in_hand_` is cleared with release and polled with acquire.
// Cancellation: the awaiter registers its stop_callback (stop_state.hpp) before it links itself and
//   never under the lock (a callback that runs at once takes the lock itself); it removes the callback
//   first thing on resumption, and ~stop_callback waits for a callback in flight on another thread.
// Rejected alternatives:
//  - lock-free waiter stacks (cppcoro's async_mutex and events: one atomic word holding both the state
//    and a LIFO list). Fastest uncontended, but a waiter cannot be unlinked from the middle of a
//    lock-free list, so cancellation and frame destruction would need tombstones and deferred
//    reclamation, and FIFO needs a reversal step. This lock costs one exchange and one store when
//    uncontended, and each critical section is a few pointer writes. It is the honest first version;
//    the primitives' interfaces do not depend on it.
//  - std::mutex: same semantics, but its unlock is a read-modify-write and it may sleep in the kernel
//    for sections this short. The spin_lock backs off to sched_yield after a short spin, so a
//    preempted holder does not burn a core (2-core machines, TSan).
//  - an atomic per-waiter state machine (as in sleep_awaiter): needed there because the timer queue
//    and the stop callback are two owners; here the list is the only owner, so its lock decides the
//    race and the state can be a plain byte.
//  - scheduling under the lock (as timers do): it protects the executor for free, but the waker's
//    unlock then races with a woken waiter that destroys the primitive (use-after-free).
#include <atomic>
#include <coroutine>
#include <cstdint>
#include <optional>

#include <corio/detail/executor.hpp>
#include <corio/detail/promise_base.hpp>
#include <corio/detail/stop_state.hpp>
#include <corio/errors.hpp>

namespace corio::detail {

/// A test-and-test-and-set lock for critical sections of a few pointer writes. Spins briefly, then
/// yields the thread. Satisfies Lockable (std::lock_guard). Thread-safe.
class spin_lock {
 public:
  void lock() noexcept {
    while (locked_.exchange(true, std::memory_order_acquire)) {  // pairs with the release in unlock()
      wait_until_free();
    }
  }
  bool try_lock() noexcept {
    return !locked_.load(std::memory_order_relaxed) && !locked_.exchange(true, std::memory_order_acquire);
  }
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  void wait_until_free() const noexcept;

  std::atomic<bool> locked_{false};
};

class waiter;

/// A coroutine parked by a waiter: what a waker still needs after it released the lock (where to
/// resume it), and the `in_hand_` flag that keeps the frame alive until the waker is done with it.
/// The base of `waiter` below and of the channels' `chan_waiter` (detail/chan_waiter.hpp), so both
/// are woken by the same wake_batch under the same rules.
class parked_coroutine {
 public:
  parked_coroutine() = default;
  parked_coroutine(const parked_coroutine&) = delete;
  parked_coroutine& operator=(const parked_coroutine&) = delete;

 protected:
  ~parked_coroutine() = default;
  /// Spins (then yields) until no waker holds this coroutine.
  void wait_until_released() const noexcept;

  std::coroutine_handle<> handle_;
  executor* owner_ = nullptr;
  std::atomic<bool> in_hand_{false};  // a waker still reads this node or schedules it (see above)

 private:
  friend class wake_batch;
  parked_coroutine* batch_next_ = nullptr;  // the wake_batch chain; written under the list's lock
};

/// Waiters that a waker (or a canceller) took off a list under its lock. The batch wakes them,
/// oldest first, when it is destroyed: declare it before the lock guard, so that it runs after the
/// lock is released and never touches the primitive.
class wake_batch {
 public:
  wake_batch() = default;
  wake_batch(const wake_batch&) = delete;
  wake_batch& operator=(const wake_batch&) = delete;
  ~wake_batch() {
    if (head_ != nullptr) {
      resume_all();
    }
  }

  /// Lock held: `w` was taken off its list and its outcome decided; it is woken after the unlock.
  void push(parked_coroutine& w) noexcept;

 private:
  void resume_all() noexcept;

  parked_coroutine* head_ = nullptr;
  parked_coroutine* tail_ = nullptr;
};

/// The FIFO of parked waiters of one primitive, and the lock that guards it and the primitive's state.
class wait_list {
 public:
  wait_list() = default;
  wait_list(const wait_list&) = delete;
  wait_list& operator=(const wait_list&) = delete;

  /// The lock. Held around every other member, and around the owning primitive's state.
  spin_lock& mutex() noexcept { return lock_; }

  /// Lock held. True if nobody waits.
  bool empty() const noexcept { return head_ == nullptr; }

  /// Lock held. Grants the oldest waiter and adds it to `woken`; false if there is none.
  bool wake_one(wake_batch& woken) noexcept;

  /// Lock held. Grants every waiter and adds them to `woken`, oldest first.
  void wake_all(wake_batch& woken) noexcept {
    while (wake_one(woken)) {
    }
  }

 private:
  friend class waiter;
  void push_back(waiter& w) noexcept;
  void remove(waiter& w) noexcept;

  spin_lock lock_;
  waiter* head_ = nullptr;
  waiter* tail_ = nullptr;
};

/// One coroutine parked, or about to park, on a wait_list: the awaiter of every sync primitive's
/// wait (derived awaiters add a result). Lives in the awaiting frame; not movable. The primitive
/// describes itself with an `operations` table and a context pointer (itself).
class waiter : public parked_coroutine {
 public:
  struct operations {
    /// Lock held: takes what the waiter waits for if it is available now; false to wait.
    bool (*try_now)(void* context) noexcept;
    /// Lock not held, may be null: returns what a waiter was granted but will not consume.
    void (*give_back)(void* context) noexcept;
  };

  /// `cancellable` false makes the wait ignore its task's stop token (condition_variable's re-lock).
  waiter(wait_list& list, void* context, const operations& ops, bool cancellable = true) noexcept
      : list_(&list), context_(context), ops_(&ops), cancellable_(cancellable) {}
  waiter(const waiter&) = delete;
  waiter& operator=(const waiter&) = delete;
  ~waiter() { abandon(); }

  bool await_ready() const noexcept { return false; }

  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> self) {
    return suspend(self, cancellable_ ? stop_token_of(self) : nullptr);
  }

  /// Returns if the wait completed; throws corio::cancelled if the task was cancelled first.
  void await_resume() {
    if (!finish()) {
      throw cancelled();
    }
  }

 protected:
  /// Parks the waiter unless it can complete (or is cancelled) at once; returns whether it suspended.
  /// After it returned true, another thread may already have resumed the coroutine: touch nothing.
  bool suspend(std::coroutine_handle<> self, stop_state* stop);

  /// On resumption: detaches the stop callback and returns true if the wait completed, false if it
  /// was cancelled (giving back what it was granted, if anything).
  bool finish() noexcept {
    if (suspended_) {
      suspended_ = false;
      if (in_hand_.load(std::memory_order_acquire)) {  // pairs with the release in wake_batch
        wait_until_released();
      }
    }
    stop_callback_.reset();
    if (state_ == state::granted && (stop_ == nullptr || !stop_->stop_requested())) {
      return true;
    }
    if (state_ == state::granted && ops_->give_back != nullptr) {
      ops_->give_back(context_);
    }
    return false;
  }

  void* context() const noexcept { return context_; }

 private:
  friend class wait_list;
  friend class wake_batch;

  enum class state : std::uint8_t { idle, waiting, granted, cancelled };

  struct on_stop {
    waiter* self;
    void operator()() const noexcept { self->cancel(); }
  };

  void cancel() noexcept;
  void abandon() noexcept;

  waiter* prev_ = nullptr;
  waiter* next_ = nullptr;
  wait_list* list_;
  void* context_;
  const operations* ops_;
  stop_state* stop_ = nullptr;
  state state_ = state::idle;  // guarded by the list's lock until the coroutine resumes
  bool cancellable_;
  bool suspended_ = false;  // the coroutine is parked on the list; touched by its own thread only
  std::optional<stop_callback<on_stop>> stop_callback_;
};

/// A copyable description of a wait, so it can be passed by value (to when_any, for instance);
/// `co_await` makes the immovable awaiter in the awaiting frame.
template <class Awaiter = waiter>
struct wait_operation {
  wait_list* list;
  void* context;
  const waiter::operations* ops;
  bool cancellable = true;
  Awaiter operator co_await() const noexcept { return Awaiter(*list, context, *ops, cancellable); }
};

inline void wait_list::push_back(waiter& w) noexcept {
  w.prev_ = tail_;
  w.next_ = nullptr;
  if (tail_ != nullptr) {
    tail_->next_ = &w;
  } else {
    head_ = &w;
  }
  tail_ = &w;
  w.state_ = waiter::state::waiting;
}

inline void wait_list::remove(waiter& w) noexcept {
  if (w.prev_ != nullptr) {
    w.prev_->next_ = w.next_;
  } else {
    head_ = w.next_;
  }
  if (w.next_ != nullptr) {
    w.next_->prev_ = w.prev_;
  } else {
    tail_ = w.prev_;
  }
  w.prev_ = nullptr;
  w.next_ = nullptr;
}

inline bool wait_list::wake_one(wake_batch& woken) noexcept {
  waiter* first = head_;
  if (first == nullptr) {
    return false;
  }
  remove(*first);
  first->state_ = waiter::state::granted;
  woken.push(*first);
  return true;
}

// Lock held; `w` is unlinked and its state decided.
inline void wake_batch::push(parked_coroutine& w) noexcept {
  w.in_hand_.store(true, std::memory_order_relaxed);  // published by the lock's release
  w.batch_next_ = nullptr;
  if (tail_ != nullptr) {
    tail_->batch_next_ = &w;
  } else {
    head_ = &w;
  }
  tail_ = &w;
}

}  // namespace corio::detail
