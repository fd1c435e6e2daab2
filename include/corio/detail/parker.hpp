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
#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>

namespace corio::detail {

class parker {
 public:
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
};

}  // namespace corio::detail
