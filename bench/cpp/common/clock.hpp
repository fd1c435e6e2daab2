#pragma once
// Monotonic timing and the statistics of in-process repetitions.
//
// On the lab's VMs the clock (and the TSC under it) advances in steps of about 10 ns, so a window
// around one tiny operation reads as 20, 30 or 40 ns. A median sticks to a step. So does an
// interquartile mean when one step holds more than half of the samples (an AMD host: 30 ns in three
// windows of four, empty or around one coroutine's creation, which then measured 0.2 ns). The mean
// keeps what each step's share says, since the operation starts at a random phase of the step; only
// the outliers (an interrupt, a page fault: microseconds) are left out, as samples far above the
// median.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

namespace lab {

using clock = std::chrono::steady_clock;

/// Nanoseconds between two time points.
inline double elapsed_ns(clock::time_point from, clock::time_point to) {
  return std::chrono::duration<double, std::nano>(to - from).count();
}

/// Mean of `values` without the outliers: those above twice the median plus 100 ns (sorts them).
/// Empty input gives 0.
inline double mean_without_outliers(std::vector<double>& values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double limit = 2 * values[values.size() / 2] + 100;
  double sum = 0;
  std::size_t kept = 0;
  for (double value : values) {
    if (value > limit) break;
    sum += value;
    ++kept;
  }
  return sum / static_cast<double>(kept);
}

/// Cost of an empty timed window (two clock reads), mean without outliers, to subtract from tiny windows.
inline double clock_overhead_ns() {
  std::vector<double> samples(10'000);
  for (double& sample : samples) {
    auto start = clock::now();
    sample = elapsed_ns(start, clock::now());
  }
  return mean_without_outliers(samples);
}

}  // namespace lab
