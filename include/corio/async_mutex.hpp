#pragma once
// corio::async_mutex: a FIFO mutex for coroutines, and its RAII guard async_lock_guard.
//
// Design note. State: `locked_`, guarded by the wait list's lock (detail/wait_list.hpp, which also
// holds the cancellation and shutdown protocol).
// Invariant: !locked_ implies nobody waits. unlock() with waiters hands the lock straight to the
//   oldest one (locked_ stays true), so try_lock() cannot barge past them and ownership passes in
//   strict FIFO order. A waiter granted the lock that then loses (its task was cancelled before it
//   resumed, or its frame is destroyed by a shutdown) hands it on in turn, so the lock is never lost;
//   a cancelled waiter never owns it.
// Threads: every member is thread-safe; owners and waiters may be on any loops or plain threads.
// Rejected: barging (a newcomer may take a just-released lock: higher throughput under contention,
//   but it can starve waiters and makes order untestable); cppcoro's lock-free state word (no O(1)
//   unlinking of a cancelled waiter; see wait_list.hpp).
#include <mutex>
#include <stdexcept>
#include <utility>

#include <corio/detail/wait_list.hpp>

namespace corio {

class async_mutex;
class condition_variable;

/// Owns one lock of an async_mutex and unlocks it when destroyed (or when unlock() is called).
/// Move-only; a moved-from or default guard owns nothing. Not thread-safe itself (one owner), but
/// it may be destroyed on any thread. Unlocking the mutex behind a guard's back is misuse: the
/// guard's destructor then finds it unlocked and std::terminate is called.
///
///     corio::async_lock_guard guard = co_await mutex.lock();
///     shared.push_back(item);        // exclusive access until `guard` goes out of scope
class async_lock_guard {
 public:
  /// A guard that holds no lock.
  async_lock_guard() noexcept = default;
  /// Adopts a lock the caller already holds (from try_lock() or lock_unguarded()).
  async_lock_guard(async_mutex& mutex, std::adopt_lock_t) noexcept : mutex_(&mutex) {}
  /// Takes over `other`'s lock; `other` then holds none.
  async_lock_guard(async_lock_guard&& other) noexcept : mutex_(std::exchange(other.mutex_, nullptr)) {}
  /// Unlocks the lock this guard held, then takes over `other`'s.
  async_lock_guard& operator=(async_lock_guard&& other) noexcept {
    if (this != &other) {
      reset();
      mutex_ = std::exchange(other.mutex_, nullptr);
    }
    return *this;
  }
  /// Unlocks the mutex if the guard holds a lock.
  ~async_lock_guard() { reset(); }

  /// True if this guard holds a lock.
  bool owns_lock() const noexcept { return mutex_ != nullptr; }
  /// Same as owns_lock().
  explicit operator bool() const noexcept { return owns_lock(); }
  /// The mutex whose lock this guard holds, or null.
  async_mutex* mutex() const noexcept { return mutex_; }

  /// Unlocks early. Throws std::logic_error if the guard holds no lock.
  void unlock();
  /// Gives up ownership without unlocking; returns the mutex (null if none). The caller must unlock.
  async_mutex* release() noexcept { return std::exchange(mutex_, nullptr); }

 private:
  void reset() noexcept;

  async_mutex* mutex_ = nullptr;
};

namespace detail {

/// Awaiter of async_mutex::lock(): a waiter whose result is the guard.
class guarded_lock_awaiter : public waiter {
 public:
  using waiter::waiter;
  async_lock_guard await_resume() {
    waiter::await_resume();
    return async_lock_guard(*static_cast<async_mutex*>(context()), std::adopt_lock);
  }
};

}  // namespace detail

/// A mutex for coroutines: waiting for it suspends the coroutine, never the thread. Waiters get the
/// lock in FIFO order, by direct hand-off. A waiter resumes on the executor it suspended on (inline
/// on the unlocking thread if it waited on a plain thread). Cancelling a waiting task makes its
/// lock() throw corio::cancelled without taking the lock. Every member is thread-safe; the lock is
/// not tied to a thread or loop, so it may be unlocked anywhere. The mutex must outlive its waiters
/// and must not be destroyed while locked. Not recursive, and it keeps no owner: a task that locks it
/// again while holding it waits forever, as with Go's and tokio's mutexes (with_timeout around the
/// lock() turns that into corio::timed_out).
///
///     corio::async_mutex mutex;
///     corio::task<> add(int x) {
///       auto guard = co_await mutex.lock();   // suspends while another task holds it
///       total += x;
///     }                                       // unlocked here, handed to the next waiter
class async_mutex {
 public:
  /// An unlocked mutex.
  async_mutex() noexcept = default;
  async_mutex(const async_mutex&) = delete;
  async_mutex& operator=(const async_mutex&) = delete;

  /// `co_await mutex.lock()` acquires the lock and returns an async_lock_guard that releases it.
  /// If the awaiting task is (or gets) cancelled before it obtains the lock, throws corio::cancelled
  /// and does not hold the lock. The operation is a copyable description (it may be passed to
  /// when_any); it does nothing until awaited.
  [[nodiscard]] detail::wait_operation<detail::guarded_lock_awaiter> lock() noexcept {
    return {&waiters_, this, &ops};
  }

  /// Like lock(), but returns nothing: the caller must call unlock() (or adopt the lock into a guard).
  [[nodiscard]] detail::wait_operation<> lock_unguarded() noexcept { return {&waiters_, this, &ops}; }

  /// Takes the lock if it is free and nobody waits for it; never suspends.
  bool try_lock() noexcept {
    std::lock_guard guard(waiters_.mutex());
    return take(this);
  }

  /// Releases the lock, handing it to the oldest waiter if there is one. May be called from any
  /// thread. Throws std::logic_error if the mutex is not locked.
  void unlock() {
    if (!unlock_if_locked()) {
      throw std::logic_error("corio::async_mutex::unlock: the mutex is not locked");
    }
  }

 private:
  friend class condition_variable;

  static bool take(void* self) noexcept {
    auto& mutex = *static_cast<async_mutex*>(self);
    if (mutex.locked_) {
      return false;
    }
    mutex.locked_ = true;
    return true;
  }
  static void give_back(void* self) noexcept { static_cast<async_mutex*>(self)->unlock_if_locked(); }
  static constexpr detail::waiter::operations ops{&take, &give_back};

  bool unlock_if_locked() noexcept {
    detail::wake_batch woken;
    std::lock_guard guard(waiters_.mutex());
    if (!locked_) {
      return false;
    }
    if (!waiters_.wake_one(woken)) {
      locked_ = false;
    }
    return true;
  }

  /// For condition_variable: whether the mutex is locked (by anyone).
  bool is_locked() noexcept {
    std::lock_guard guard(waiters_.mutex());
    return locked_;
  }

  /// For condition_variable's re-lock: a lock() that ignores cancellation.
  detail::wait_operation<> lock_uncancellable() noexcept { return {&waiters_, this, &ops, false}; }

  detail::wait_list waiters_;
  bool locked_ = false;  // guarded by waiters_.mutex()
};

inline void async_lock_guard::unlock() {
  if (mutex_ == nullptr) {
    throw std::logic_error("corio::async_lock_guard::unlock: the guard holds no lock");
  }
  std::exchange(mutex_, nullptr)->unlock();
}

inline void async_lock_guard::reset() noexcept {
  if (mutex_ != nullptr) {
    std::exchange(mutex_, nullptr)->unlock();  // throws (so terminates) only after misuse
  }
}

}  // namespace corio
