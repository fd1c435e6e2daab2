#pragma once
// `corio`: corio tasks whose body is a `co_await corio::yield()` loop, spawned on one
// corio::event_loop and run with run_until_idle(). The loop's run queue does the round-robin.

#include <corio/event_loop.hpp>
#include <corio/task.hpp>

#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "harness.hpp"

namespace lab {

inline corio::task<void> yield_task(std::uint64_t switches, tally* counts) {
  for (std::uint64_t i = 0; i < switches; ++i) {
    ++counts->switches;
    co_await corio::yield();
  }
  ++counts->finished;
}

template <class Probe>
corio::task<void> probe_task(Probe probe) {
  probe();
  co_return;
}

class corio_pool {
 public:
  corio_pool(std::size_t capacity, std::uint64_t switches_each, tally* counts)
      : switches_each_(switches_each), counts_(counts) {
    tasks_.reserve(capacity);
  }

  void create() { tasks_.push_back(yield_task(switches_each_, counts_)); }

  void launch() {
    for (auto& task : tasks_) loop_.spawn(std::move(task));
    tasks_.clear();
  }

  /// The loop cannot pause between rounds, so a probe runs as a task spawned after every worker:
  /// the FIFO run queue reaches it once each worker has run to its first yield.
  template <class Probe>
  void run(Probe probe) {
    if constexpr (!std::is_same_v<Probe, no_probe>) loop_.spawn(probe_task(std::move(probe)));
    loop_.run_until_idle();
  }

  void clear() { tasks_.clear(); }

 private:
  corio::event_loop loop_;
  std::vector<corio::task<void>> tasks_;
  std::uint64_t switches_each_;
  tally* counts_;
};

}  // namespace lab
