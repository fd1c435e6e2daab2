#pragma once
// Lets one thread sleep until another has something for it, without lost wake-ups.
//
// Protocol (a Dekker pair; every access is seq_cst so the four operations fall in one total order):
//   sleeper: prepare_park() stores `parked`, then re-checks every source of work; if it finds any it
//            calls cancel_park(), otherwise park() blocks on a futex while the word is still `parked`.
//   waker:   publishes its work with a seq_cst store, then unpark_if_parked() loads the word; only if
//            it reads `parked` does it exchange it back and issue the futex wake (a syscall).
// Either the sleeper's re-check sees the work, or the waker's load sees `parked`: both cannot miss.
// Threads: prepare_park/cancel_park/park only on the owning thread; unpark_if_parked from any thread.
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

  /// Wakes the owning thread if, and only if, it is parked. Cheap (one load) when it is not.
  void unpark_if_parked() noexcept {
    if (state_.load(std::memory_order_seq_cst) == parked && state_.exchange(awake, std::memory_order_seq_cst) == parked) {
      wake();
    }
  }

 private:
  static constexpr std::uint32_t awake = 0;
  static constexpr std::uint32_t parked = 1;

  void wake() noexcept;

  std::atomic<std::uint32_t> state_{awake};
};

}  // namespace corio::detail
