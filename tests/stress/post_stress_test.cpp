// Stress: many producers post to one parked-and-woken loop. Bounded in count (and so in time);
// checks exactly-once delivery, per-producer FIFO, and that no wake-up is lost (a lost wake-up
// leaves the loop parked forever and the test hits its ctest timeout).
#include <corio/event_loop.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>
#include <vector>

namespace {

struct producer_plan {
  int producers;
  int posts_each;
  bool pause_between_bursts;  // lets the loop park often, so the wake-up path is exercised
};

void run_plan(const producer_plan& plan) {
  corio::event_loop loop;
  std::vector<int> next_expected(static_cast<std::size_t>(plan.producers), 0);
  long total_ran = 0;
  long order_violations = 0;
  const long total = static_cast<long>(plan.producers) * plan.posts_each;

  std::thread consumer([&] { loop.run(); });
  std::atomic<bool> go{false};
  std::vector<std::thread> producers;
  for (int p = 0; p < plan.producers; ++p) {
    producers.emplace_back([&, p] {
      std::minstd_rand random(static_cast<unsigned>(p) + 1);
      while (!go.load(std::memory_order_acquire)) {
        std::this_thread::yield();
      }
      for (int i = 0; i < plan.posts_each; ++i) {
        bool accepted = loop.post([&, p, i] {
          int& expected = next_expected[static_cast<std::size_t>(p)];
          order_violations += expected != i;
          expected = i + 1;
          if (++total_ran == total) {
            loop.stop();
          }
        });
        ASSERT_TRUE(accepted);
        if (plan.pause_between_bursts && random() % 64 == 0) {
          std::this_thread::sleep_for(std::chrono::microseconds(random() % 50));
        }
      }
    });
  }
  go.store(true, std::memory_order_release);
  for (auto& producer : producers) {
    producer.join();
  }
  consumer.join();
  EXPECT_EQ(total_ran, total);
  EXPECT_EQ(order_violations, 0);
  for (int p = 0; p < plan.producers; ++p) {
    EXPECT_EQ(next_expected[static_cast<std::size_t>(p)], plan.posts_each);
  }
}

TEST(post_stress, eight_producers_deliver_exactly_once_in_per_producer_order) {
  run_plan({.producers = 8, .posts_each = 50'000, .pause_between_bursts = false});
}

TEST(post_stress, bursty_producers_never_lose_a_wake_up) {
  run_plan({.producers = 4, .posts_each = 20'000, .pause_between_bursts = true});
}

TEST(post_stress, short_lived_producer_threads_keep_delivering) {
  corio::event_loop loop;
  std::atomic<long> ran{0};
  std::thread consumer([&] { loop.run(); });
  for (int round = 0; round < 200; ++round) {
    std::thread producer([&] {
      for (int i = 0; i < 100; ++i) {
        loop.post([&] { ran.fetch_add(1, std::memory_order_relaxed); });
      }
    });
    producer.join();
  }
  loop.post([&] { loop.stop(); });
  consumer.join();
  EXPECT_EQ(ran.load(), 200L * 100L);
}

TEST(post_stress, loops_posting_to_each_other_do_not_deadlock) {
  corio::event_loop a;
  corio::event_loop b;
  constexpr int rounds = 20'000;
  int a_count = 0;
  int b_count = 0;
  std::thread thread_a([&] { a.run(); });
  std::thread thread_b([&] { b.run(); });
  // Each functor on A posts one to B and vice versa: a flood in both directions at once.
  for (int i = 0; i < rounds; ++i) {
    a.post([&] {
      ++a_count;
      b.post([&] {
        if (++b_count == rounds) {
          b.stop();
        }
      });
    });
  }
  thread_b.join();
  a.stop();
  thread_a.join();
  EXPECT_EQ(a_count, rounds);
  EXPECT_EQ(b_count, rounds);
}

}  // namespace
