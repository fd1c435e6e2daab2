#pragma once
// The clock a worker reads to bound a chain of LIFO hand-offs (worker.hpp): read once per hand-off, so
// it must be cheaper than the hand-off itself. On x86-64 with an invariant TSC (constant rate, never
// stops) that is rdtsc, about 20 cycles, converted to a bound in ticks once per process by timing it
// against steady_clock; elsewhere steady_clock in nanoseconds (a vDSO call). A worker that migrates
// between cores whose TSCs disagree can only see its chain end early (a jump forward) or at once (a
// jump backward reads as a huge unsigned interval), never late.
// Threads: immutable after construction; each worker holds its own copy.
// Rejected: steady_clock everywhere (a vDSO call, several times rdtsc's cost, on a path that runs once
// per event for an unbuffered ping-pong); rdtsc without the invariant-TSC check (on CPUs whose TSC
// rate follows frequency scaling, the bound would drift with it).
#include <chrono>
#include <cstdint>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace corio::detail {

class chain_clock {
 public:
  /// A clock whose bound() is `bound` in its own ticks. The first call calibrates (about 200 us).
  explicit chain_clock(std::chrono::nanoseconds bound) noexcept;

  /// Now, in ticks.
  std::uint64_t now() const noexcept {
#if defined(__x86_64__)
    if (use_tsc_) {
      return __rdtsc();
    }
#endif
    return static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }

  /// Whether `now() - start` has reached the bound (a clock gone backwards counts as reached).
  bool reached(std::uint64_t start) const noexcept { return now() - start >= bound_ticks_; }

 private:
  bool use_tsc_ = false;
  std::uint64_t bound_ticks_ = 0;
};

}  // namespace corio::detail
