#pragma once
// Monotonic timing and the statistics of in-process repetitions.
//
// On the lab's VM the clock (and the TSC under it) advances in steps of about 10 ns, so a window
// around one tiny operation reads as 20 or 30 ns. The median of such samples is stuck on a step;
// the mean of the middle half (interquartile mean) is not, because the operation starts at a random
// phase of the step, and it still ignores the outliers (interrupts, page faults) a plain mean keeps.

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

/// Mean of the middle half of `values` (sorts them). Empty input gives 0.
inline double interquartile_mean(std::vector<double>& values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t quarter = values.size() / 4;
  double sum = 0;
  for (std::size_t i = quarter; i < values.size() - quarter; ++i) sum += values[i];
  return sum / static_cast<double>(values.size() - 2 * quarter);
}

/// Cost of an empty timed window (two clock reads), interquartile mean, to subtract from tiny windows.
inline double clock_overhead_ns() {
  std::vector<double> samples(10'000);
  for (double& sample : samples) {
    auto start = clock::now();
    sample = elapsed_ns(start, clock::now());
  }
  return interquartile_mean(samples);
}

}  // namespace lab
