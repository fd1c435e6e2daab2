#pragma once
// How long a runtime worker with I/O in flight polls its reactor before it sleeps (worker.cpp,
// spin_on_reactor).
//
// Design note.
// A spin pays when the peer answers within it: the worker catches the completion awake and spares a
//   sleep and a wake-up (on a VM, a halted vCPU and an IPI). It is waste when answers come later: with
//   a request every 100-300 us, a fixed 50 us spin before each sleep tripled the CPU an echo server
//   spent. So each spin's length follows what the previous waits showed:
//   - the spin caught work after polling in vain at least once: the next one gets the full length
//     (work its first poll finds, such as the completion of a send that poll submitted, says nothing
//     for spinning: a single poll finds it too, and the length stays as it was);
//   - it gave up and the worker slept: if the whole wait (spin plus sleep) was shorter than twice the
//     full length, a full spin would probably have caught the answer (the sleep's measure includes
//     its own wake-up, tens of microseconds on a VM: hence twice), and the next one gets the full
//     length; else the next one gets half of this one, and none once that is under a microsecond (a
//     single poll, which waits for nothing);
//   - while spins are off, every `probe_every`-th wait spins the full length once: the peers may have
//     become fast again (a wake-up slower than usual can make a quick answer look slow, and the rule
//     above alone would then switch spinning off for good). A probe that catches work restores the
//     full length; one that gives up leaves spins off.
//   A worker whose peers answer slowly spins a full length once per probe_every waits, and one whose
//   peers answer fast keeps the full spin.
// Threads: one worker's own state, touched by its thread only.
#include <chrono>
#include <cstdint>

namespace corio::detail {

class spin_budget {
 public:
  static constexpr std::uint32_t probe_every = 16;

  explicit constexpr spin_budget(std::chrono::nanoseconds full) noexcept : full_(full), next_(full) {}

  /// A spin begins: how long it may poll.
  std::chrono::nanoseconds start() noexcept {
    probing_ = next_ == std::chrono::nanoseconds::zero() && ++waits_without_spin_ == probe_every;
    if (probing_) {
      waits_without_spin_ = 0;
      return full_;
    }
    return next_;
  }

  /// The spin found work after at least one poll that found none.
  void caught() noexcept {
    next_ = full_;
    waits_without_spin_ = 0;
  }

  /// The spin polled for `spun` (what start() returned) without finding work, then the worker
  /// waited `slept` more (in its park, or not at all if work showed up before it slept).
  void gave_up(std::chrono::nanoseconds spun, std::chrono::nanoseconds slept) noexcept {
    if (spun + slept < 2 * full_) {
      next_ = full_;
      waits_without_spin_ = 0;
      return;
    }
    std::chrono::nanoseconds half = spun / 2;
    next_ = probing_ || half < shortest ? std::chrono::nanoseconds::zero() : half;
  }

 private:
  static constexpr std::chrono::nanoseconds shortest = std::chrono::microseconds(1);

  std::chrono::nanoseconds full_;
  std::chrono::nanoseconds next_;
  std::uint32_t waits_without_spin_ = 0;
  bool probing_ = false;
};

}  // namespace corio::detail
