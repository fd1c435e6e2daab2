#pragma once
// A race between event_loop::post and stop(), shared by the unit test and the fallback test (which
// runs it with membarrier(2) denied, so the stopping handshake's seq_cst fallback is exercised).
#include <corio/event_loop.hpp>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace corio::test {

// Copying this functor takes ~20 us, which holds each post inside the window between its stop check
// and its record's publication, so nearly every round's stop lands in one.
struct slow_to_copy_counter {
  std::atomic<int>* runs;
  explicit slow_to_copy_counter(std::atomic<int>* counter) : runs(counter) {}
  slow_to_copy_counter(const slow_to_copy_counter& other) : runs(other.runs) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
    while (std::chrono::steady_clock::now() < until) {
    }
  }
  void operator()() const { runs->fetch_add(1); }
};

// Two producers post until refused while another thread stops the loop; returns the number of
// rounds in which a post returned true but its functor had not run by the time run() returned.
inline int rounds_with_accepted_posts_unrun(int rounds) {
  int bad = 0;
  for (int round = 0; round < rounds; ++round) {
    corio::event_loop loop;
    std::atomic<int> accepted{0};
    std::atomic<int> ran{0};
    std::thread runner([&] { loop.run(); });
    std::vector<std::thread> producers;
    for (int p = 0; p < 2; ++p) {
      producers.emplace_back([&] {
        const slow_to_copy_counter functor{&ran};
        while (loop.post(functor)) {
          accepted.fetch_add(1);
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::microseconds(300));
    loop.stop();
    runner.join();
    const int ran_by_return = ran.load();
    for (std::thread& producer : producers) {
      producer.join();
    }
    bad += ran_by_return == accepted.load() ? 0 : 1;
  }
  return bad;
}

}  // namespace corio::test
