#pragma once
// Lets one thread sleep until another has something for it, without lost wake-ups.
//
// Protocol (a Dekker pair; every access is seq_cst so the four operations fall in one total order):
//   sleeper: prepare_park() stores `parked`, then re-checks every source of work; if it finds any it
//            calls cancel_park(), otherwise park() blocks on a futex while the word is still `parked`.
//   waker:   publishes its work with a seq_cst store, then unpark_if_parked() loads the word; only if
//            it reads `parked` does it exchange it back and issue the futex wake (a syscall).
// Either the sleeper's re-check sees the work, or the waker's load sees `parked`: both cannot miss.
//
// A second, permit-style use serves the runtime's workers, which are woken by being picked from an
// idle list rather than by a store they re-check: unpark() leaves a permit (`notified`) that the next
// park_unless_notified() consumes without sleeping, so a wake that arrives before the worker has
// actually blocked is not lost.
// Threads: prepare_park/cancel_park/park/park_unless_notified only on the owning thread;
// unpark_if_parked and unpark from any thread.
//
// Backend: once its thread does I/O, the sleep itself moves into the thread's reactor (src/io/io_slot):
// set_backend() makes park() block in the reactor's wait (io_uring_enter or epoll_wait, reaping
// completions) and wake() write the reactor's eventfd instead of the futex. The state word and the
// protocol above are unchanged, so a wake still costs a syscall only when the owner is parked.
// `backend_` is set by the owning thread while it is awake, before the seq_cst store of `parked` that
// a waker must read before it calls wake(): that store/exchange pair publishes it.
// Detaching the backend (its loop or worker is going away) is a Dekker pair too: wake() increments
// `wakers_in_backend_` then loads `backend_`; set_backend(nullptr) stores null then waits until the
// count is zero (all seq_cst). A waker that exchanged `parked` just before the owner woke by itself,
// finished and tore its reactor down either sees null (futex word: harmless, the parker is shared by
// the post queue's producers) or is waited for. So no wake() writes to a reactor's closed eventfd.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>

namespace corio::detail {

/// What a parker can sleep in instead of its futex: the owning thread's reactor.
class park_backend {
 public:
  /// Owning thread: blocks until wake(), an I/O completion, or `timeout` (forever if empty).
  virtual void park(std::optional<std::chrono::nanoseconds> timeout) noexcept = 0;
  /// Any thread: makes a park() in progress, or the next one, return promptly.
  virtual void wake() noexcept = 0;

 protected:
  ~park_backend() = default;
};

class parker {
 public:
  /// Owning thread, while awake: sleep in `backend` from now on (null: the futex again). Setting null
  /// waits for every wake() still inside the old backend, so the backend may be destroyed right after.
  void set_backend(park_backend* backend) noexcept;

  void prepare_park() noexcept { state_.store(parked, std::memory_order_seq_cst); }
  void cancel_park() noexcept { state_.store(awake, std::memory_order_relaxed); }

  /// Blocks until woken or until `timeout` passes (forever if empty); spurious returns are allowed.
  void park(std::optional<std::chrono::nanoseconds> timeout) noexcept;

  /// Sleeps until unpark() or `timeout`, unless a permit is already waiting; consumes the permit.
  void park_unless_notified(std::optional<std::chrono::nanoseconds> timeout) noexcept {
    std::uint32_t expected = awake;
    if (state_.compare_exchange_strong(expected, parked, std::memory_order_seq_cst)) {
      park(timeout);
    } else {
      state_.store(awake, std::memory_order_relaxed);  // consume the permit
    }
  }

  /// Leaves a permit, waking the owning thread if it is parked.
  void unpark() noexcept {
    if (state_.exchange(notified, std::memory_order_seq_cst) == parked) {
      wake();
    }
  }

  /// Wakes the owning thread if, and only if, it is parked. Cheap (one load) when it is not.
  void unpark_if_parked() noexcept {
    if (state_.load(std::memory_order_seq_cst) == parked && state_.exchange(awake, std::memory_order_seq_cst) == parked) {
      wake();
    }
  }

 private:
  static constexpr std::uint32_t awake = 0;
  static constexpr std::uint32_t parked = 1;
  static constexpr std::uint32_t notified = 2;

  void wake() noexcept;

  std::atomic<std::uint32_t> state_{awake};
  std::atomic<park_backend*> backend_{nullptr};
  std::atomic<std::uint32_t> wakers_in_backend_{0};  // wake() calls between their load of backend_ and return
};

}  // namespace corio::detail
