// The chain clock's calibration; the design note is in chain_clock.hpp.
#include "chain_clock.hpp"

#include <type_traits>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace corio::detail {

namespace {

using steady = std::chrono::steady_clock;
static_assert(std::is_same_v<steady::duration, std::chrono::nanoseconds>, "steady_clock ticks in ns");

constexpr auto calibration_span = std::chrono::microseconds(200);

// TSC ticks per nanosecond, or 0 if this CPU has no invariant TSC.
double tsc_per_ns() noexcept {
#if defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  constexpr unsigned invariant_tsc = 1u << 8;  // CPUID 0x80000007, EDX bit 8
  if (__get_cpuid(0x80000007, &eax, &ebx, &ecx, &edx) == 0 || (edx & invariant_tsc) == 0) {
    return 0;
  }
  const steady::time_point start = steady::now();
  const std::uint64_t tsc_start = __rdtsc();
  steady::time_point end = start;
  while (end - start < calibration_span) {
    end = steady::now();
  }
  const std::uint64_t tsc_end = __rdtsc();
  const auto elapsed = std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count();
  return static_cast<double>(tsc_end - tsc_start) / static_cast<double>(elapsed);
#else
  return 0;
#endif
}

}  // namespace

chain_clock::chain_clock(std::chrono::nanoseconds bound) noexcept {
  static const double rate = tsc_per_ns();
  use_tsc_ = rate > 0;
  bound_ticks_ = static_cast<std::uint64_t>(static_cast<double>(bound.count()) * (use_tsc_ ? rate : 1.0));
}

}  // namespace corio::detail
