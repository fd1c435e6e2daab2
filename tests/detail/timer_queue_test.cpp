// One thread's timer_queue (detail/timer_queue.hpp) driven directly: order, local and remote disarm,
// entries reused, compaction of remote cancellations.
#include <corio/detail/timer_queue.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <random>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

namespace {

using corio::detail::timer;
using corio::detail::timer_queue;

struct probe : timer {
  probe(timer::clock::time_point deadline, std::vector<std::size_t>* log, std::size_t id)
      : timer(deadline, &on_fire), log(log), id(id) {}
  static void on_fire(timer& t) noexcept {
    auto& self = static_cast<probe&>(t);
    self.fired.fetch_add(1, std::memory_order_relaxed);
    if (self.log != nullptr) {
      self.log->push_back(self.id);
    }
  }
  std::vector<std::size_t>* log;
  std::size_t id;
  std::atomic<int> fired{0};
};

// Makes `queue` this thread's timers for the scope, as a loop or worker does while it runs.
struct owning {
  explicit owning(timer_queue& queue) { corio::detail::current_timers = &queue; }
  ~owning() { corio::detail::current_timers = nullptr; }
  owning(const owning&) = delete;
  owning& operator=(const owning&) = delete;
};

// 100k timers per thread, on two threads at once (two workers' queues): every third disarmed before
// its deadline; the rest fire once each, in deadline order.
TEST(timer_queue, a_hundred_thousand_timers_per_thread_fire_in_deadline_order) {
  constexpr std::size_t count = 100'000;
  auto run = [](unsigned seed, bool* ordered) {
    timer_queue queue;
    owning scope(queue);
    std::vector<std::size_t> log;
    std::vector<std::unique_ptr<probe>> probes;
    std::vector<std::size_t> offsets(count);
    for (std::size_t i = 0; i < count; ++i) {
      offsets[i] = i;
    }
    std::shuffle(offsets.begin(), offsets.end(), std::minstd_rand(seed));
    auto base = timer::clock::now() - 1h;  // every deadline is in the past: one fire_due() fires them all
    for (std::size_t i = 0; i < count; ++i) {
      probes.push_back(std::make_unique<probe>(base + std::chrono::microseconds(offsets[i]), &log, offsets[i]));
      probes.back()->arm();
    }
    std::size_t disarmed = 0;
    for (std::size_t i = 0; i < count; i += 3) {
      disarmed += probes[i]->disarm() ? 1 : 0;
    }
    std::size_t fired = queue.fire_due();
    *ordered = std::is_sorted(log.begin(), log.end()) && fired == count - disarmed && disarmed == (count + 2) / 3 &&
               queue.empty();
    for (std::size_t i = 0; i < count; ++i) {
      if (i % 3 != 0) {
        *ordered = *ordered && probes[i]->fired.load() == 1 && !probes[i]->disarm();
      } else {
        *ordered = *ordered && probes[i]->fired.load() == 0;
      }
    }
  };
  bool first = false;
  bool second = false;
  std::thread other(run, 2u, &second);
  run(1u, &first);
  other.join();
  EXPECT_TRUE(first);
  EXPECT_TRUE(second);
}

// The owner fires due timers while another thread disarms half of them: each timer either fired once
// (disarm returns false, after the callback returned) or never (disarm returns true). The cancelled
// entries stay in the heap until popped or compacted, and are reused for later timers.
TEST(timer_queue, timers_disarmed_from_another_thread_fire_once_or_never) {
  constexpr std::size_t rounds = 20;
  constexpr std::size_t per_round = 2'000;
  for (std::size_t round = 0; round < rounds; ++round) {
    timer_queue queue;
    std::vector<std::unique_ptr<probe>> probes;
    std::atomic<bool> armed{false};
    std::atomic<std::size_t> remote_true{0};
    std::thread owner([&] {
      owning scope(queue);
      auto start = timer::clock::now();
      for (std::size_t i = 0; i < per_round; ++i) {
        probes.push_back(std::make_unique<probe>(start + std::chrono::microseconds(i % 500), nullptr, i));
        probes.back()->arm();
      }
      armed.store(true, std::memory_order_release);
      while (!queue.empty()) {
        queue.fire_due();
      }
      for (std::size_t i = 1; i < per_round; i += 2) {
        EXPECT_FALSE(probes[i]->disarm());  // the owner's own: all fired by now
      }
    });
    while (!armed.load(std::memory_order_acquire)) {
      std::this_thread::yield();
    }
    for (std::size_t i = 0; i < per_round; i += 2) {
      bool cancelled = probes[i]->disarm();
      remote_true.fetch_add(cancelled ? 1 : 0);
      EXPECT_EQ(probes[i]->fired.load(), cancelled ? 0 : 1) << "timer " << i;
    }
    owner.join();
    for (std::size_t i = 1; i < per_round; i += 2) {
      EXPECT_EQ(probes[i]->fired.load(), 1);
    }
  }
}

// Timers disarmed from another thread long before their deadline: the owner drops them in one pass
// once they outnumber a quarter of its heap, so a stream of re-armed far deadlines stays bounded.
TEST(timer_queue, remote_cancellations_of_far_deadlines_are_compacted) {
  timer_queue queue;
  owning scope(queue);
  std::vector<std::unique_ptr<probe>> live;
  for (int i = 0; i < 100; ++i) {
    live.push_back(std::make_unique<probe>(timer::clock::now() + 1h, nullptr, 0));
    live.back()->arm();
  }
  for (int batch = 0; batch < 50; ++batch) {
    std::vector<std::unique_ptr<probe>> gone;
    for (int i = 0; i < 100; ++i) {
      gone.push_back(std::make_unique<probe>(timer::clock::now() + 1h, nullptr, 0));
      gone.back()->arm();
    }
    std::thread([&] {
      for (auto& each : gone) {
        EXPECT_TRUE(each->disarm());
      }
    }).join();
    queue.fire_due();  // nothing is due: it compacts
  }
  EXPECT_FALSE(queue.empty());
  EXPECT_LE(queue.size(), 200u);
  for (auto& each : live) {
    EXPECT_TRUE(each->disarm());
  }
  EXPECT_TRUE(queue.empty());
}

}  // namespace
