#pragma once
// corio::condition_variable: wait for a condition guarded by an async_mutex.
//
// Design note. wait(guard) is a small task of two waits on the same mechanism
// (detail/wait_list.hpp): (1) park on the condition variable's list, then unlock the mutex; (2) once
// notified (or cancelled), re-lock the mutex through its ordinary FIFO, ignoring cancellation, so the
// guard always owns the lock again when wait() returns or throws.
// Invariants:
//  - the waiter is linked on the condition variable's list *before* the mutex is unlocked, so a
//    notify by anyone who takes the mutex afterwards reaches it: no lost wake-up;
//  - while it waits, the caller's guard owns nothing (released at the start, re-adopted after the
//    re-lock), so a frame destroyed mid-wait by a shutdown never unlocks a mutex it does not hold;
//  - a notification handed to a waiter that is cancelled or destroyed before it resumes is passed to
//    the next waiter (notify_one again), so notify_one() is never lost to a cancellation.
// Threads: every member is thread-safe; notify may be called with or without the mutex held (as
//   with std::condition_variable, holding it is what makes "check the predicate, then wait" safe).
// Rejected: wait morphing (notify moves the waiter straight onto the mutex's list, saving one
//   wake-up per notified waiter). It needs a waiter that migrates between two locks, with a
//   cancellation that must find which list holds it; the two-step task is simpler and, being built
//   from the same waiters, inherits their cancellation and shutdown behaviour. A possible later
//   optimization, measurable with the wake-up count.
#include <coroutine>
#include <mutex>
#include <stdexcept>

#include <corio/async_mutex.hpp>
#include <corio/detail/promise_base.hpp>
#include <corio/detail/wait_list.hpp>
#include <corio/errors.hpp>
#include <corio/task.hpp>

namespace corio {

/// A condition variable for coroutines holding an async_mutex. `co_await cv.wait(guard)` unlocks the
/// guard's mutex and suspends until notified, then re-locks it (waiting in the mutex's FIFO) before
/// returning. A wait ends only for a notify, but not always its own: a waiter that notify_all()
/// granted and that is cancelled before it resumes passes its wake-up to the oldest waiter, which may
/// have started waiting after that notify_all(). Another task may also have changed the state between
/// notify and re-lock, so wait with a predicate. A waiter resumes on
/// the executor it suspended on. If the awaiting task is cancelled while it waits, wait() re-locks
/// the mutex and throws corio::cancelled: the guard owns the lock either way. wait() throws
/// std::logic_error if the guard does not hold a locked mutex. Every member is thread-safe.
///
///     corio::task<item> pop() {
///       auto guard = co_await mutex.lock();
///       co_await not_empty.wait(guard, [&] { return !queue.empty(); });
///       item front = queue.front(); queue.pop_front(); co_return front;
///     }
///     // producer: { auto guard = co_await mutex.lock(); queue.push_back(x); } not_empty.notify_one();
class condition_variable {
 public:
  /// A condition variable nobody waits on.
  condition_variable() noexcept = default;
  condition_variable(const condition_variable&) = delete;
  condition_variable& operator=(const condition_variable&) = delete;

  /// Unlocks `guard`'s mutex, waits for a notification, re-locks. See the class comment.
  task<void> wait(async_lock_guard& guard);

  /// `while (!pred()) co_await wait(guard);` — `pred` is called with the mutex held.
  template <class Predicate>
  task<void> wait(async_lock_guard& guard, Predicate pred) {
    while (!pred()) {
      co_await wait(guard);
    }
  }

  /// Wakes the oldest waiter, if any.
  void notify_one() noexcept {
    detail::wake_batch woken;  // resumes a plain-thread waiter after the lock is released
    std::lock_guard guard(waiters_.mutex());
    waiters_.wake_one(woken);
  }

  /// Wakes every current waiter; they re-lock the mutex one at a time, in FIFO order.
  void notify_all() noexcept {
    detail::wake_batch woken;
    std::lock_guard guard(waiters_.mutex());
    waiters_.wake_all(woken);
  }

 private:
  struct parked {
    bool unlocked;   // the mutex was unlocked (the waiter parked), so it must be re-locked
    bool cancelled;  // the task was cancelled before it was notified
  };

  // Step (1): parks on the list, then unlocks the mutex; reports instead of throwing, so that
  // wait() can re-lock first.
  class park_awaiter : public detail::waiter {
   public:
    park_awaiter(condition_variable& cv, async_mutex& mutex) noexcept
        : waiter(cv.waiters_, &cv, ops), mutex_(&mutex) {}

    template <class Promise>
    bool await_suspend(std::coroutine_handle<Promise> self) {
      async_mutex& mutex = *mutex_;
      unlocked_ = true;
      if (!suspend(self, detail::stop_token_of(self))) {
        unlocked_ = false;  // cancelled before it parked: the mutex is still held
        return false;
      }
      mutex.unlock_if_locked();  // `this` may already be resumed elsewhere: use the local only
      return true;
    }
    parked await_resume() noexcept {
      bool completed = finish();
      return {unlocked_, !completed};
    }

   private:
    static bool never(void*) noexcept { return false; }
    static void give_back(void* self) noexcept { static_cast<condition_variable*>(self)->notify_one(); }
    static constexpr operations ops{&never, &give_back};

    async_mutex* mutex_;
    bool unlocked_ = false;
  };

  detail::wait_list waiters_;
};

inline task<void> condition_variable::wait(async_lock_guard& guard) {
  async_mutex* mutex = guard.mutex();
  if (mutex == nullptr || !mutex->is_locked()) {
    throw std::logic_error("corio::condition_variable::wait: the guard does not hold a locked mutex");
  }
  guard.release();  // the guard owns nothing until the re-lock below
  parked outcome = co_await park_awaiter{*this, *mutex};
  if (outcome.unlocked) {
    co_await mutex->lock_uncancellable();
  }
  guard = async_lock_guard(*mutex, std::adopt_lock);
  if (outcome.cancelled) {
    throw cancelled();
  }
}

}  // namespace corio
