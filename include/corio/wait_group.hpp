#pragma once
// corio::wait_group (Go's sync.WaitGroup) and corio::latch: wait for a count to reach zero.
//
// Design note. Both are one detail::zero_count: a count guarded by the wait list's lock
// (detail/wait_list.hpp, which also holds the cancellation and shutdown protocol), whose waiters are
// all woken by the change that brings it to zero. They differ only in their interface and errors.
// Invariant: a count of zero has no waiters (the change to zero wakes them all under the lock, and a
//   wait that finds zero does not link). A change that would make the count negative or overflow is
//   refused under the lock, leaving the count as it was.
// Threads: every member is thread-safe.
#include <cstddef>
#include <limits>
#include <mutex>
#include <stdexcept>

#include <corio/detail/wait_list.hpp>

namespace corio {
namespace detail {

/// A count whose waiters are released when it reaches zero.
class zero_count {
 public:
  explicit zero_count(std::ptrdiff_t initial) noexcept : count_(initial) {}
  zero_count(const zero_count&) = delete;
  zero_count& operator=(const zero_count&) = delete;

  /// Adds `n` (which may be negative) and wakes every waiter if the count reaches zero. Returns false,
  /// changing nothing, if the result would be negative or overflow.
  bool add(std::ptrdiff_t n) noexcept {
    wake_batch woken;  // resumes plain-thread waiters after the lock is released
    std::lock_guard guard(waiters_.mutex());
    if (n < 0 ? count_ + n < 0 : count_ > std::numeric_limits<std::ptrdiff_t>::max() - n) {
      return false;
    }
    count_ += n;
    if (count_ == 0) {
      waiters_.wake_all(woken);
    }
    return true;
  }

  std::ptrdiff_t count() noexcept {
    std::lock_guard guard(waiters_.mutex());
    return count_;
  }

  wait_operation<> wait() noexcept { return {&waiters_, this, &ops}; }

 private:
  static bool is_zero(void* self) noexcept { return static_cast<zero_count*>(self)->count_ == 0; }
  static constexpr waiter::operations ops{&is_zero, nullptr};

  wait_list waiters_;
  std::ptrdiff_t count_;  // guarded by waiters_.mutex(); never negative
};

}  // namespace detail

/// Waits for a group of operations to finish, like Go's sync.WaitGroup: add(n) before starting n
/// operations, done() as each finishes, and `co_await wg.wait()` resumes when the count is back to
/// zero (at once if it is zero). Waiters resume on the executor they suspended on (inline on the
/// thread whose done() reached zero if they waited on a plain thread). Cancelling a waiting task
/// makes its wait() throw corio::cancelled. Every member is thread-safe; the group is reusable.
///
///     corio::wait_group wg;
///     wg.add(2);
///     loop.spawn(job(wg));                   // each job calls wg.done() when it finishes
///     loop.spawn(job(wg));
///     co_await wg.wait();
class wait_group {
 public:
  /// A group with a count of zero.
  wait_group() noexcept = default;
  wait_group(const wait_group&) = delete;
  wait_group& operator=(const wait_group&) = delete;

  /// Adds `n` to the count (n may be negative). Wakes every waiter if the count reaches zero. Throws
  /// std::logic_error, changing nothing, if the count would go below zero (or overflow).
  void add(std::ptrdiff_t n) {
    if (!count_.add(n)) {
      throw std::logic_error("corio::wait_group: the count would go below zero (more done() than add())");
    }
  }

  /// Marks one operation finished: add(-1). Throws std::logic_error if the count is already zero.
  void done() { add(-1); }

  /// The current count (a snapshot).
  std::ptrdiff_t count() noexcept { return count_.count(); }

  /// `co_await wg.wait()` completes when the count is zero. Throws corio::cancelled if the awaiting
  /// task is (or gets) cancelled first. A copyable description.
  [[nodiscard]] detail::wait_operation<> wait() noexcept { return count_.wait(); }

 private:
  detail::zero_count count_{0};
};

/// A single-use countdown, like std::latch but awaitable: count_down() decrements it, and
/// `co_await l.wait()` resumes once it has reached zero (at once if it has). Waiters resume on the
/// executor they suspended on (inline on the thread whose count_down() reached zero if they waited on
/// a plain thread). Cancelling a waiting task makes its wait() throw corio::cancelled. Every member is
/// thread-safe.
///
///     corio::latch started(3);
///     // each of 3 workers: started.count_down();
///     co_await started.wait();               // all 3 have started
class latch {
 public:
  /// Throws std::invalid_argument if `expected` is negative.
  explicit latch(std::ptrdiff_t expected) : count_(checked(expected)) {}
  latch(const latch&) = delete;
  latch& operator=(const latch&) = delete;

  /// Decrements the count by `n`, waking every waiter when it reaches zero. Throws
  /// std::invalid_argument if `n` is negative and std::logic_error, changing nothing, if `n` is more
  /// than the count left.
  void count_down(std::ptrdiff_t n = 1) {
    if (!count_.add(-checked(n))) {
      throw std::logic_error("corio::latch::count_down: counting down past zero");
    }
  }

  /// True if the count has reached zero; never suspends.
  bool try_wait() noexcept { return count_.count() == 0; }

  /// `co_await l.wait()` completes when the count is zero. Throws corio::cancelled if the awaiting
  /// task is (or gets) cancelled first. A copyable description.
  [[nodiscard]] detail::wait_operation<> wait() noexcept { return count_.wait(); }

 private:
  static std::ptrdiff_t checked(std::ptrdiff_t n) {
    if (n < 0) {
      throw std::invalid_argument("corio::latch: negative count");
    }
    return n;
  }

  detail::zero_count count_;
};

}  // namespace corio
