#pragma once
// corio::event (manual reset) and corio::auto_reset_event: one-bit signals coroutines wait for.
//
// Design note. State: one flag per event, guarded by the wait list's lock (detail/wait_list.hpp,
// which also holds the cancellation and shutdown protocol). event's flag is also an atomic so that
// is_set() needs no lock: it is stored (release) only under the lock and loaded (acquire) by is_set().
// Invariants: a set event has no waiters (set() wakes them all under the lock, and a wait that finds
//   it set does not link). A signalled auto_reset_event has no waiters (set() hands the signal to the
//   oldest waiter instead of storing it).
// Cost (auto_reset_event, which a benchmark ping-pongs on): a wait or a set is one uncontended lock
//   round trip; a wait that suspends also registers a stop callback if its task is cancellable.
//   Nothing allocates.
// Threads: every member is thread-safe.
#include <atomic>
#include <mutex>

#include <corio/detail/wait_list.hpp>

namespace corio {

/// A manual-reset event: once set, every wait() completes at once until reset(). set() resumes all
/// current waiters, each on the executor it suspended on (inline on the setting thread if it waited
/// on a plain thread). Cancelling a waiting task makes its wait() throw corio::cancelled. Every member
/// is thread-safe. The event must outlive its waiters.
///
///     corio::event ready;
///     corio::task<> worker() { co_await ready.wait(); /* runs after set() */ }
///     // elsewhere, on any thread:
///     ready.set();
class event {
 public:
  /// An event that starts cleared (or set).
  explicit event(bool initially_set = false) noexcept : set_(initially_set) {}
  event(const event&) = delete;
  event& operator=(const event&) = delete;

  /// Sets the event and wakes every waiter. Setting a set event does nothing.
  void set() noexcept {
    detail::wake_batch woken;  // resumes plain-thread waiters after the lock is released
    std::lock_guard guard(waiters_.mutex());
    set_.store(true, std::memory_order_release);  // pairs with the acquire in is_set()
    waiters_.wake_all(woken);
  }

  /// Clears the event: later waits suspend until the next set(). Waiters already woken stay woken.
  void reset() noexcept {
    std::lock_guard guard(waiters_.mutex());
    set_.store(false, std::memory_order_release);
  }

  /// True if the event is set (a snapshot). Lock-free.
  bool is_set() const noexcept { return set_.load(std::memory_order_acquire); }

  /// `co_await ev.wait()` completes when the event is set (at once if it is). Throws
  /// corio::cancelled if the awaiting task is (or gets) cancelled first. A copyable description.
  [[nodiscard]] detail::wait_operation<> wait() noexcept { return {&waiters_, this, &ops}; }

 private:
  static bool is_set_now(void* self) noexcept {
    return static_cast<event*>(self)->set_.load(std::memory_order_relaxed);  // under the lock
  }
  static constexpr detail::waiter::operations ops{&is_set_now, nullptr};

  detail::wait_list waiters_;
  std::atomic<bool> set_;  // written under waiters_.mutex()
};

/// An auto-reset event: set() releases exactly one waiter, the oldest; if nobody waits, the event
/// stays signalled until the next wait, which then completes at once and clears it. Setting a
/// signalled event does nothing (signals do not accumulate). A waiter resumes on the executor it
/// suspended on (inline on the setting thread if it waited on a plain thread). Cancelling a waiting
/// task makes its wait() throw corio::cancelled without consuming a signal; a signal handed to a
/// waiter that is cancelled before it resumes is passed on. Every member is thread-safe.
///
///     corio::auto_reset_event ping, pong;
///     corio::task<> a() { for (;;) { ping.set(); co_await pong.wait(); } }
///     corio::task<> b() { for (;;) { co_await ping.wait(); pong.set(); } }
class auto_reset_event {
 public:
  /// An event that starts unsignalled (or signalled, for the first wait).
  explicit auto_reset_event(bool initially_set = false) noexcept : signalled_(initially_set) {}
  auto_reset_event(const auto_reset_event&) = delete;
  auto_reset_event& operator=(const auto_reset_event&) = delete;

  /// Wakes the oldest waiter, or leaves the event signalled if nobody waits.
  void set() noexcept {
    detail::wake_batch woken;  // resumes a plain-thread waiter after the lock is released
    std::lock_guard guard(waiters_.mutex());
    if (!waiters_.wake_one(woken)) {
      signalled_ = true;
    }
  }

  /// Consumes the signal if the event is signalled; never suspends.
  bool try_wait() noexcept {
    std::lock_guard guard(waiters_.mutex());
    return consume(this);
  }

  /// `co_await ev.wait()` completes when a set() is addressed to this waiter (at once, clearing the
  /// signal, if the event is signalled). Throws corio::cancelled if the awaiting task is (or gets)
  /// cancelled first. A copyable description.
  [[nodiscard]] detail::wait_operation<> wait() noexcept { return {&waiters_, this, &ops}; }

 private:
  static bool consume(void* self) noexcept {
    auto& ev = *static_cast<auto_reset_event*>(self);
    bool was = ev.signalled_;
    ev.signalled_ = false;
    return was;
  }
  static void give_back(void* self) noexcept { static_cast<auto_reset_event*>(self)->set(); }
  static constexpr detail::waiter::operations ops{&consume, &give_back};

  detail::wait_list waiters_;
  bool signalled_;  // guarded by waiters_.mutex()
};

}  // namespace corio
