#pragma once
// The three timed phases of the `coro` scenario (bench/scenarios.md), written once for every pool.
//
// A pool owns the coroutines of one implementation and offers:
//   pool(capacity, switches_each, tally*)  room for `capacity` coroutines that each switch `switches_each` times
//   create()      create one coroutine, allocated and constructed, not started
//   launch()      make the created coroutines runnable (untimed; a no-op for round-robin pools)
//   run(probe)    run all to completion; call probe() once, when every one has reached its first suspension
//   clear()       destroy all coroutines (finished or never started)
// Every body does `for i < switches_each: { ++tally.switches; suspend }` then `++tally.finished`.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "../common/check.hpp"
#include "../common/clock.hpp"
#include "../common/rss.hpp"

namespace lab {

/// Counters every coroutine body updates; plain integers, the coroutines of a run share one thread.
struct tally {
  std::uint64_t switches = 0;
  std::uint64_t finished = 0;
};

/// The probe of a run that needs none; pools that must schedule a probe skip it for this type.
struct no_probe {
  void operator()() const noexcept {}
};

/// Sizes of one cell, from the command line.
struct coro_cell {
  std::size_t coroutines = 0;
  std::uint64_t switches_each = 0;
  std::size_t memory_batch = 0;
  std::size_t create_batches = 0;
};

/// The measured values of one row.
struct coro_result {
  double create_ns = 0;
  double switch_ns = 0;
  double bytes_per_coroutine = 0;
};

template <class Pool>
double resident_bytes_per_coroutine(std::size_t count) {
  tally counts;
  Pool pool(count, 1, &counts);
  std::int64_t before = anonymous_resident_bytes();
  std::int64_t after = 0;
  for (std::size_t i = 0; i < count; ++i) pool.create();
  pool.launch();
  pool.run([&] {
    expect(counts.switches == count, "memory probe ran before every coroutine reached its first suspension");
    after = anonymous_resident_bytes();
  });
  expect(counts.finished == count, "memory phase: not every coroutine finished");
  pool.clear();
  return static_cast<double>(after - before) / static_cast<double>(count);
}

template <class Pool>
double create_ns(std::size_t count, std::size_t batches) {
  tally counts;
  Pool pool(count, 1, &counts);
  const double overhead = clock_overhead_ns();
  std::vector<double> samples;
  samples.reserve(batches);
  for (std::size_t batch = 0; batch < batches; ++batch) {
    auto start = clock::now();
    for (std::size_t i = 0; i < count; ++i) pool.create();
    auto stop = clock::now();
    samples.push_back(elapsed_ns(start, stop) - overhead);
    pool.clear();
  }
  expect(counts.switches == 0, "create phase: a coroutine ran before it was started");
  double per_batch = mean_without_outliers(samples);
  return per_batch > 0 ? per_batch / static_cast<double>(count) : 0;
}

template <class Pool>
double switch_ns(std::size_t count, std::uint64_t switches_each) {
  tally counts;
  Pool pool(count, switches_each, &counts);
  for (std::size_t i = 0; i < count; ++i) pool.create();
  pool.launch();
  auto start = clock::now();
  pool.run(no_probe{});
  auto stop = clock::now();
  const std::uint64_t expected = count * switches_each;
  expect(counts.switches == expected, "switch phase: counted " + std::to_string(counts.switches) +
                                          " switches, expected " + std::to_string(expected));
  expect(counts.finished == count, "switch phase: not every coroutine finished");
  pool.clear();
  return elapsed_ns(start, stop) / static_cast<double>(expected);
}

/// Runs memory, create and switch phases in the order the spec fixes (memory first, on a fresh heap).
template <class Pool>
coro_result measure(const coro_cell& cell) {
  coro_result result;
  result.bytes_per_coroutine = resident_bytes_per_coroutine<Pool>(cell.memory_batch);
  result.create_ns = create_ns<Pool>(cell.coroutines, cell.create_batches);
  result.switch_ns = switch_ns<Pool>(cell.coroutines, cell.switches_each);
  return result;
}

}  // namespace lab
