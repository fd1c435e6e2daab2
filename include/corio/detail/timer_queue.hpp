#pragma once
// The deadlines an executor must act on: a binary min-heap of intrusive timers behind a mutex.
//
// Purpose: sleep_for/sleep_until/with_timeout arm a timer that lives in their own awaiter (no
// allocation); the executor fires due timers on its thread(s) and parks no longer than the earliest.
// Invariants:
//  - A timer is in the heap iff `index_ != not_armed`; `index_` is its heap position. Both are
//    guarded by the mutex.
//  - fire() callbacks run while the mutex is held. So once disarm() returns, no callback for that
//    timer is running or will run, and its owner may free it. Callbacks must therefore be short and
//    must not touch the timer queue (scheduling a coroutine is fine).
//  - `earliest_ns_` mirrors the top deadline (or `none`) for lock-free peeking; written under the
//    mutex and read without it, both seq_cst: a runtime worker going to sleep re-reads it after
//    registering as a sleeper, against an arming thread that publishes it and then looks for one.
// Threads: every member is thread-safe.
// Rejected: a hierarchical wheel (faster arm/cancel at scale, but coarser and far more code than this
// first version needs); lazy deletion (a cancelled entry would outlive the frame it points into).
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

namespace corio::detail {

class timer_queue {
 public:
  using clock = std::chrono::steady_clock;

  class timer {
   public:
    using callback = void (*)(timer&) noexcept;
    timer(clock::time_point deadline, callback fire) noexcept : deadline_(deadline), fire_(fire) {}
    timer(const timer&) = delete;
    timer& operator=(const timer&) = delete;
    clock::time_point deadline() const noexcept { return deadline_; }

   private:
    friend class timer_queue;
    static constexpr std::size_t not_armed = static_cast<std::size_t>(-1);
    clock::time_point deadline_;
    callback fire_;
    std::size_t index_ = not_armed;
  };

  /// Adds `t`. Returns true if it is now the earliest deadline.
  bool arm(timer& t);
  /// Removes `t` if it is still armed. Returns true if it was (its callback will never run).
  bool disarm(timer& t) noexcept;
  /// Fires every timer due now, earliest first; returns how many fired. Lock-free, and without reading
  /// the clock, when no timer is armed; lock-free when none is due yet.
  std::size_t fire_due() noexcept;
  /// How long until the earliest deadline (zero or negative if it has passed), or nothing; lock-free.
  std::optional<clock::duration> time_until_earliest() const noexcept;
  bool empty() const noexcept { return earliest_ns_.load(std::memory_order_seq_cst) == none; }

 private:
  static constexpr std::int64_t none = INT64_MAX;

  void sift_up(std::size_t index) noexcept;
  void sift_down(std::size_t index) noexcept;
  void place(std::size_t index, timer* t) noexcept;
  void remove_at(std::size_t index) noexcept;
  void publish_earliest() noexcept;

  mutable std::mutex mutex_;
  std::vector<timer*> heap_;
  std::atomic<std::int64_t> earliest_ns_{none};
};

}  // namespace corio::detail
