#pragma once
// The three cases of the `spawn` scenario (bench/scenarios.md) on corio's runtime. Each body runs as a
// task spawned onto the runtime, reads the clock itself, runs its self-check after the clock stops and
// returns an `outcome`: the elapsed seconds, or why the check failed.
//
// Threads: every task here may run on any worker. The ping_pong pair shares `court`: the ball is an
// atomic stored with release and loaded with acquire (the events order it too, but the spec does not
// lean on that), so the check is race-free at any worker count.

#include <corio/event.hpp>
#include <corio/join_handle.hpp>
#include <corio/runtime.hpp>
#include <corio/task.hpp>

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "../common/clock.hpp"

namespace lab {

/// What a case body reports to main: seconds when `error` is empty.
struct outcome {
  double seconds = 0;
  std::string error;
};

/// W, hash rounds per fanout task (about 1 ms on the lab's VM); fixed by the spec.
inline constexpr std::uint64_t work_rounds = 600'000;

/// The scenario's serial integer hash: W rounds of xor-shift, multiply, add (wrapping).
inline std::uint64_t work(std::uint64_t x, std::uint64_t rounds) {
  for (std::uint64_t k = 0; k < rounds; ++k) {
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ULL;
    x += 0x9E3779B97F4A7C15ULL;
  }
  return x;
}

// --- spawn_join -------------------------------------------------------------------------------------

inline corio::task<int> small_child(std::uint64_t i) { co_return static_cast<int>(1 + i % 7); }

/// Spawns N children returning 1 + i % 7, then joins every handle in spawn order.
inline corio::task<outcome> spawn_join(std::uint64_t n) {
  std::vector<corio::join_handle<int>> handles;
  handles.reserve(n);
  const auto start = clock::now();
  for (std::uint64_t i = 0; i < n; ++i) handles.push_back(corio::spawn(small_child(i)));
  std::uint64_t sum = 0;
  for (auto& handle : handles) sum += static_cast<std::uint64_t>(co_await std::move(handle));
  const double seconds = elapsed_ns(start, clock::now()) / 1e9;

  std::uint64_t expected = 0;
  for (std::uint64_t i = 0; i < n; ++i) expected += 1 + i % 7;
  if (sum != expected) {
    co_return outcome{0, "spawn_join: sum " + std::to_string(sum) + ", expected " + std::to_string(expected)};
  }
  co_return outcome{seconds, {}};
}

// --- ping_pong --------------------------------------------------------------------------------------

struct court {
  corio::auto_reset_event ping;
  corio::auto_reset_event pong;
  std::atomic<std::uint64_t> ball{0};
};

/// Serves R rounds; returns the rounds in which it saw the ball the ponger sent back.
inline corio::task<std::uint64_t> pinger(court& c, std::uint64_t rounds) {
  std::uint64_t good = 0;
  for (std::uint64_t i = 0; i < rounds; ++i) {
    c.ball.store(2 * i + 1, std::memory_order_release);
    c.ping.set();
    co_await c.pong.wait();
    good += c.ball.load(std::memory_order_acquire) == 2 * i + 2;
  }
  co_return good;
}

/// Returns R rounds; returns the rounds in which it saw the ball the pinger served.
inline corio::task<std::uint64_t> ponger(court& c, std::uint64_t rounds) {
  std::uint64_t good = 0;
  for (std::uint64_t i = 0; i < rounds; ++i) {
    co_await c.ping.wait();
    good += c.ball.load(std::memory_order_acquire) == 2 * i + 1;
    c.ball.store(2 * i + 2, std::memory_order_release);
    c.pong.set();
  }
  co_return good;
}

/// Two tasks wake each other through two auto-reset events for R round trips. `c` lives in this
/// frame, which outlives both tasks because it joins them.
inline corio::task<outcome> ping_pong(std::uint64_t rounds) {
  court c;
  const auto start = clock::now();
  auto pong_side = corio::spawn(ponger(c, rounds));
  auto ping_side = corio::spawn(pinger(c, rounds));
  const std::uint64_t pong_good = co_await std::move(pong_side);
  const std::uint64_t ping_good = co_await std::move(ping_side);
  const double seconds = elapsed_ns(start, clock::now()) / 1e9;
  if (pong_good != rounds || ping_good != rounds) {
    co_return outcome{0, "ping_pong: good rounds ponger " + std::to_string(pong_good) + ", pinger " +
                             std::to_string(ping_good) + ", expected " + std::to_string(rounds)};
  }
  co_return outcome{seconds, {}};
}

// --- fanout -----------------------------------------------------------------------------------------

inline corio::task<std::uint64_t> hash_child(std::uint64_t seed, std::uint64_t rounds) {
  co_return work(seed, rounds);
}

/// F tasks each compute work(seed, W); joined in spawn order and compared with a reference computed
/// before the clock. The seed is F, a run-time value, so nothing folds at compile time.
inline corio::task<outcome> fanout(std::uint64_t tasks, std::uint64_t rounds) {
  const std::uint64_t seed = tasks;
  const std::uint64_t reference = work(seed, rounds);
  std::vector<corio::join_handle<std::uint64_t>> handles;
  handles.reserve(tasks);
  const auto start = clock::now();
  for (std::uint64_t i = 0; i < tasks; ++i) handles.push_back(corio::spawn(hash_child(seed, rounds)));
  std::uint64_t wrong = 0;
  std::uint64_t joined = 0;
  for (auto& handle : handles) {
    wrong += (co_await std::move(handle)) != reference;
    ++joined;
  }
  const double seconds = elapsed_ns(start, clock::now()) / 1e9;
  if (wrong != 0 || joined != tasks) {
    co_return outcome{0, "fanout: " + std::to_string(wrong) + " of " + std::to_string(joined) +
                             " results differ from the reference"};
  }
  co_return outcome{seconds, {}};
}

}  // namespace lab
