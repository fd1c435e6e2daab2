#include <corio/event.hpp>
#include <corio/event_loop.hpp>
#include <corio/sync_wait.hpp>
#include <corio/task.hpp>
#include <corio/wait_group.hpp>
#include <corio/when_any.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include "support/loops.hpp"

namespace {

using corio::test::run_on_loop;

// ---- wait_group ----

TEST(wait_group, wait_with_a_zero_count_completes_at_once) {
  corio::wait_group wg;
  bool done = false;
  auto body = [&]() -> corio::task<void> {
    co_await wg.wait();
    done = true;
  };
  corio::sync_wait(body());
  EXPECT_TRUE(done);
}

TEST(wait_group, waiters_resume_only_after_the_last_done) {
  corio::wait_group wg;
  corio::event_loop loop;
  int woken = 0;
  auto waiter = [&]() -> corio::task<void> {
    co_await wg.wait();
    ++woken;
  };
  wg.add(3);
  loop.spawn(waiter());
  loop.spawn(waiter());
  loop.run_until_idle();
  wg.done();
  wg.done();
  loop.run_until_idle();
  EXPECT_EQ(woken, 0);
  EXPECT_EQ(wg.count(), 1);
  wg.done();
  loop.run_until_idle();
  EXPECT_EQ(woken, 2);
  EXPECT_EQ(wg.count(), 0);
}

TEST(wait_group, done_below_zero_throws_logic_error_and_leaves_the_count) {
  corio::wait_group wg;
  EXPECT_THROW(wg.done(), std::logic_error);
  EXPECT_EQ(wg.count(), 0);
  wg.add(2);
  EXPECT_THROW(wg.add(-3), std::logic_error);
  EXPECT_EQ(wg.count(), 2);
}

TEST(wait_group, is_reusable_after_reaching_zero) {
  corio::wait_group wg;
  corio::event_loop loop;
  int woken = 0;
  auto waiter = [&]() -> corio::task<void> {
    co_await wg.wait();
    ++woken;
  };
  for (int round = 0; round < 3; ++round) {
    wg.add(1);
    loop.spawn(waiter());
    loop.run_until_idle();
    EXPECT_EQ(woken, round);
    wg.done();
    loop.run_until_idle();
    EXPECT_EQ(woken, round + 1);
  }
}

TEST(wait_group, done_from_many_plain_threads_wakes_a_loop_waiter_once) {
  constexpr int workers = 8;
  corio::wait_group wg;
  corio::event_loop loop;
  int woken = 0;
  std::atomic<int> finished{0};
  wg.add(workers);
  auto waiter = [&]() -> corio::task<void> {
    co_await wg.wait();
    ++woken;
    EXPECT_EQ(finished.load(), workers);
    loop.stop();
  };
  loop.spawn(waiter());
  std::vector<std::thread> threads;
  for (int i = 0; i < workers; ++i) {
    threads.emplace_back([&] {
      finished.fetch_add(1);
      wg.done();
    });
  }
  loop.run();
  for (auto& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(woken, 1);
}

TEST(wait_group, cancelled_waiter_is_removed_without_touching_the_count) {
  corio::wait_group wg;
  wg.add(1);
  run_on_loop([&]() -> corio::task<void> {
    auto first = co_await corio::when_any(wg.wait(), corio::yield());
    EXPECT_EQ(first.index(), 1u);
    co_return;
  });
  EXPECT_EQ(wg.count(), 1);
  wg.done();  // would resume the finished frame if the waiter were left linked (ASan)
  EXPECT_EQ(wg.count(), 0);
}

TEST(wait_group, destroying_a_loop_with_waiters_unlinks_them) {
  corio::wait_group wg;
  wg.add(1);
  auto waiter = [&]() -> corio::task<void> { co_await wg.wait(); };
  {
    corio::event_loop loop;
    for (int i = 0; i < 5; ++i) {
      loop.spawn(waiter());
    }
    loop.run_until_idle();
  }
  wg.done();
  EXPECT_EQ(wg.count(), 0);
}

// ---- latch ----

TEST(latch, count_down_to_zero_releases_waiters) {
  corio::latch gate(2);
  corio::event_loop loop;
  int woken = 0;
  auto waiter = [&]() -> corio::task<void> {
    co_await gate.wait();
    ++woken;
  };
  loop.spawn(waiter());
  loop.run_until_idle();
  EXPECT_FALSE(gate.try_wait());
  gate.count_down();
  loop.run_until_idle();
  EXPECT_EQ(woken, 0);
  gate.count_down();
  loop.run_until_idle();
  EXPECT_EQ(woken, 1);
  EXPECT_TRUE(gate.try_wait());
  loop.spawn(waiter());  // a wait after zero completes at once
  loop.run_until_idle();
  EXPECT_EQ(woken, 2);
}

TEST(latch, count_down_by_n_and_past_zero_throws_logic_error) {
  corio::latch gate(3);
  gate.count_down(2);
  EXPECT_THROW(gate.count_down(2), std::logic_error);
  EXPECT_FALSE(gate.try_wait());
  gate.count_down(1);
  EXPECT_TRUE(gate.try_wait());
  EXPECT_THROW(gate.count_down(), std::logic_error);
}

TEST(latch, negative_counts_throw_invalid_argument) {
  EXPECT_THROW(corio::latch(-1), std::invalid_argument);
  corio::latch gate(1);
  EXPECT_THROW(gate.count_down(-1), std::invalid_argument);
  EXPECT_FALSE(gate.try_wait());
}

TEST(latch, plain_thread_waiter_is_woken_by_the_last_count_down_on_another_thread) {
  corio::latch gate(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] { gate.count_down(); });
  }
  corio::sync_wait(gate.wait());
  EXPECT_TRUE(gate.try_wait());
  for (auto& thread : threads) {
    thread.join();
  }
}

TEST(latch, cancelled_waiter_throws_cancelled) {
  corio::latch gate(1);
  bool threw = false;
  run_on_loop([&]() -> corio::task<void> {
    auto waiter = [&]() -> corio::task<void> {
      try {
        co_await gate.wait();
      } catch (const corio::cancelled&) {
        threw = true;
        throw;
      }
    };
    auto first = co_await corio::when_any(waiter(), corio::yield());
    EXPECT_EQ(first.index(), 1u);
  });
  EXPECT_TRUE(threw);
  gate.count_down();
  EXPECT_TRUE(gate.try_wait());
}

}  // namespace
