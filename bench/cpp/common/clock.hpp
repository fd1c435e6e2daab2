#pragma once
// Monotonic timing and the median used for in-process repetitions.

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

/// Median of `values` (reorders them). Empty input gives 0.
inline double median(std::vector<double>& values) {
  if (values.empty()) return 0;
  auto mid = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), mid, values.end());
  return *mid;
}

/// Median cost of an empty timed window (two clock reads), to subtract from tiny windows.
inline double clock_overhead_ns() {
  std::vector<double> samples(10'001);
  for (double& sample : samples) {
    auto start = clock::now();
    sample = elapsed_ns(start, clock::now());
  }
  return median(samples);
}

}  // namespace lab
