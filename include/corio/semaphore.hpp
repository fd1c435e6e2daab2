#pragma once
// corio::semaphore: a counting semaphore for coroutines.
//
// Design note. State: `available_`, guarded by the wait list's lock (detail/wait_list.hpp, which also
// holds the cancellation and shutdown protocol).
// Invariant: available_ > 0 implies nobody waits. release() grants permits to waiters first, oldest
//   first, and only banks what is left, so permits go out in FIFO order and try_acquire() cannot
//   barge past waiters. A waiter granted a permit that then loses (its task was cancelled before it
//   resumed, or its frame is destroyed by a shutdown) releases it again, so permits are conserved.
// Threads: every member is thread-safe.
#include <concepts>
#include <cstddef>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <utility>

#include <corio/detail/wait_list.hpp>

namespace corio {

class semaphore;

/// Owns one permit of a semaphore and returns it when destroyed, on every path (tokio's
/// SemaphorePermit). Move-only; a moved-from or default permit owns nothing. Not thread-safe itself
/// (one owner), but it may be destroyed on any thread.
///
///     corio::semaphore_permit permit = co_await slots.acquire_permit();
///     co_await download(u);            // the permit goes back when `permit` goes out of scope
class semaphore_permit {
 public:
  semaphore_permit() noexcept = default;
  /// Adopts a permit the caller already took (from try_acquire() or acquire()).
  semaphore_permit(semaphore& owner, std::adopt_lock_t) noexcept : semaphore_(&owner) {}
  semaphore_permit(semaphore_permit&& other) noexcept : semaphore_(std::exchange(other.semaphore_, nullptr)) {}
  /// Returns the permit this one held, then takes over `other`'s.
  semaphore_permit& operator=(semaphore_permit&& other) noexcept {
    if (this != &other) {
      reset();
      semaphore_ = std::exchange(other.semaphore_, nullptr);
    }
    return *this;
  }
  ~semaphore_permit() { reset(); }

  /// True if this permit holds one.
  explicit operator bool() const noexcept { return semaphore_ != nullptr; }
  /// Keeps the permit taken for good: the semaphore has one fewer from now on (tokio's forget).
  void forget() noexcept { semaphore_ = nullptr; }
  /// Returns the permit now, if this one holds it.
  void reset() noexcept;

 private:
  semaphore* semaphore_ = nullptr;
};

namespace detail {

/// Awaiter of semaphore::acquire_permit(): a waiter whose result is the permit.
class permit_awaiter : public waiter {
 public:
  using waiter::waiter;
  semaphore_permit await_resume() {
    waiter::await_resume();
    return semaphore_permit(*static_cast<semaphore*>(context()), std::adopt_lock);
  }
};

}  // namespace detail

/// A counting semaphore: acquire() takes one permit, suspending the coroutine (never the thread)
/// while none is available; release() returns permits and grants them to waiters in FIFO order (the
/// woken tasks then run in their executors' order: on one worker, the last one woken runs first). A
/// waiter resumes on the executor it suspended on (inline on the releasing thread if it waited on a plain
/// thread). Cancelling a waiting task makes its acquire() throw corio::cancelled without consuming a
/// permit. Every member is thread-safe. The semaphore must outlive its waiters.
///
///     corio::semaphore slots(4);             // at most 4 downloads at once
///     corio::task<> fetch(url u) {
///       co_await slots.acquire();            // suspends while 4 are running
///       co_await download(u);                // (release on the error path too)
///       slots.release();
///     }
class semaphore {
 public:
  /// Starts with `initial` permits.
  explicit semaphore(std::size_t initial) noexcept : available_(initial) {}
  /// A signed count: throws std::invalid_argument if it is negative (which would otherwise convert
  /// to a huge number of permits).
  template <std::signed_integral Count>
  explicit semaphore(Count initial) : semaphore(non_negative(initial, "corio::semaphore: a negative number of permits")) {}
  semaphore(const semaphore&) = delete;
  semaphore& operator=(const semaphore&) = delete;

  /// `co_await sem.acquire()` takes one permit, waiting for one if necessary. If the awaiting task
  /// is (or gets) cancelled before it obtains the permit, throws corio::cancelled and takes none.
  /// A copyable description (it may be passed to when_any); it does nothing until awaited.
  [[nodiscard]] detail::wait_operation<> acquire() noexcept { return {&waiters_, this, &ops}; }
  /// acquire(), yielding a semaphore_permit that returns the permit when it goes.
  [[nodiscard]] detail::wait_operation<detail::permit_awaiter> acquire_permit() noexcept {
    return {&waiters_, this, &ops};
  }

  /// Takes one permit if one is available; never suspends.
  bool try_acquire() noexcept {
    std::lock_guard guard(waiters_.mutex());
    return take(this);
  }

  /// release(n) for a signed `n`: throws std::invalid_argument (releasing nothing) if it is negative.
  template <std::signed_integral Count>
  void release(Count n) {
    release(non_negative(n, "corio::semaphore::release: a negative number of permits"));
  }

  /// Returns `n` permits: each goes to the oldest waiter, if any, else into the pool. Throws
  /// std::overflow_error (releasing nothing) if the pool would exceed the maximum std::size_t.
  void release(std::size_t n = 1) {
    detail::wake_batch woken;  // resumes plain-thread waiters after the lock is released
    std::lock_guard guard(waiters_.mutex());
    if (n > std::numeric_limits<std::size_t>::max() - available_) {
      throw std::overflow_error("corio::semaphore::release: too many permits");
    }
    while (n > 0 && waiters_.wake_one(woken)) {
      --n;
    }
    available_ += n;
  }

  /// The number of permits available right now (a snapshot).
  std::size_t available() noexcept {
    std::lock_guard guard(waiters_.mutex());
    return available_;
  }

 private:
  friend class semaphore_permit;

  template <std::signed_integral Count>
  static std::size_t non_negative(Count count, const char* what) {
    if (count < 0) {
      throw std::invalid_argument(what);
    }
    return static_cast<std::size_t>(count);
  }
  static bool take(void* self) noexcept {
    auto& sem = *static_cast<semaphore*>(self);
    if (sem.available_ == 0) {
      return false;
    }
    --sem.available_;
    return true;
  }
  static void give_back(void* self) noexcept { static_cast<semaphore*>(self)->release_one(); }
  static constexpr detail::waiter::operations ops{&take, &give_back};

  void release_one() noexcept {
    detail::wake_batch woken;
    std::lock_guard guard(waiters_.mutex());
    if (!waiters_.wake_one(woken) && available_ != std::numeric_limits<std::size_t>::max()) {
      ++available_;
    }
  }

  detail::wait_list waiters_;
  std::size_t available_;  // guarded by waiters_.mutex()
};

inline void semaphore_permit::reset() noexcept {
  if (semaphore* owner = std::exchange(semaphore_, nullptr)) {
    owner->release_one();
  }
}

}  // namespace corio
