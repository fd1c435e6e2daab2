#include <corio/join_set.hpp>
#include <corio/runtime.hpp>
#include <corio/task.hpp>
#include <corio/time.hpp>
#include <corio/when_all.hpp>
#include <corio/when_any.hpp>
#include <corio/yield.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

using namespace std::chrono_literals;

namespace {

corio::runtime::options two_workers() { return {.workers = 2, .max_blocking_threads = 4}; }

corio::task<int> after(std::chrono::milliseconds delay, int value) {
  co_await corio::sleep_for(delay);
  co_return value;
}

TEST(join_set, next_yields_results_in_completion_order_then_nullopt) {
  corio::runtime rt(two_workers());
  auto order = rt.block_on([]() -> corio::task<std::vector<int>> {
    corio::join_set<int> set;
    set.spawn(after(60ms, 3));
    set.spawn(after(1ms, 1));
    set.spawn(after(30ms, 2));
    EXPECT_EQ(set.size(), 3u);
    std::vector<int> seen;
    while (auto value = co_await set.next()) {
      seen.push_back(*value);
    }
    EXPECT_TRUE(set.empty());
    co_return seen;
  }());
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
}

// A set moves (tokio's JoinSet does; a user trial found it could not): returned from a function and
// kept in a vector, it still yields its tasks' results; a moved-from set is empty and refuses spawn.
TEST(join_set, a_moved_set_keeps_its_tasks_and_the_moved_from_one_is_empty) {
  corio::runtime rt(two_workers());
  int sum = rt.block_on([]() -> corio::task<int> {
    auto started = [] {
      corio::join_set<int> set;
      set.spawn(after(1ms, 1));
      set.spawn(after(2ms, 2));
      return set;
    };
    std::vector<corio::join_set<int>> sets;
    sets.push_back(started());
    corio::join_set<int> moved_from = started();
    sets.push_back(std::move(moved_from));
    EXPECT_TRUE(moved_from.empty());
    EXPECT_FALSE(co_await moved_from.next());
    EXPECT_THROW(moved_from.spawn(after(1ms, 0)), corio::invalid_task);
    moved_from = std::move(sets.back());
    sets.pop_back();
    int total = 0;
    while (auto value = co_await sets.front().next()) {
      total += *value;
    }
    while (auto value = co_await moved_from.next()) {
      total += *value;
    }
    co_return total;
  }());
  EXPECT_EQ(sum, 6);
}

TEST(join_set, next_rethrows_a_tasks_exception_and_goes_on) {
  corio::runtime rt(two_workers());
  int after_failure = rt.block_on([]() -> corio::task<int> {
    corio::join_set<int> set;
    set.spawn([]() -> corio::task<int> {
      co_await corio::sleep_for(1ms);
      throw std::domain_error("bad");
    });
    set.spawn(after(40ms, 5));
    EXPECT_THROW(co_await set.next(), std::domain_error);
    auto value = co_await set.next();
    co_return value.value_or(-1);
  }());
  EXPECT_EQ(after_failure, 5);
}

TEST(join_set, destroying_the_set_cancels_what_still_runs) {
  corio::runtime rt(two_workers());
  auto stopped = std::make_shared<std::atomic<int>>(0);
  rt.block_on([](std::shared_ptr<std::atomic<int>> count) -> corio::task<void> {
    {
      corio::join_set<void> set;
      for (int i = 0; i < 4; ++i) {
        set.spawn([count]() -> corio::task<void> {
          try {
            co_await corio::sleep_for(10s);
          } catch (const corio::cancelled&) {
            count->fetch_add(1);
            throw;
          }
        });
      }
      co_await corio::sleep_for(5ms);
    }
    co_await corio::sleep_for(50ms);
  }(stopped));
  EXPECT_EQ(stopped->load(), 4);
}

TEST(join_set, next_on_an_empty_set_returns_nullopt_at_once) {
  corio::runtime rt(two_workers());
  bool empty = rt.block_on([]() -> corio::task<bool> {
    corio::join_set<int> set;
    co_return !(co_await set.next()).has_value();
  }());
  EXPECT_TRUE(empty);
}

// Two next() in flight with one task pending both waited for it, and one of them for good (a review).
TEST(join_set, two_next_in_flight_wait_for_different_outcomes) {
  corio::runtime rt(two_workers());
  auto taken = rt.block_on([]() -> corio::task<std::pair<std::optional<int>, std::optional<int>>> {
    corio::join_set<int> set;
    set.spawn(after(5ms, 1));
    auto [first, second] = co_await corio::with_timeout(5s, corio::when_all(set.next(), set.next()));
    co_return std::pair{first, second};
  }());
  EXPECT_EQ(taken.first, std::optional<int>(1));
  EXPECT_EQ(taken.second, std::nullopt);
  auto both = rt.block_on([]() -> corio::task<std::vector<int>> {
    corio::join_set<int> set;
    set.spawn(after(5ms, 1));
    set.spawn(after(10ms, 2));
    auto [first, second] = co_await corio::with_timeout(5s, corio::when_all(set.next(), set.next()));
    co_return std::vector<int>{first.value_or(0), second.value_or(0)};
  }());
  std::sort(both.begin(), both.end());
  EXPECT_EQ(both, (std::vector<int>{1, 2}));
}

}  // namespace

// next() beside a timer in when_any, on two workers, where the two often complete at once: a next()
// that lost took no result, so every child's value is taken exactly once (a user trial lost some
// when next() was a task that had taken its result before when_any picked the timer). The window is
// narrow: before the fix, a batch of this size lost a result in about two runs of three.
corio::task<std::pair<int, long>> take_all_racing_timers(int children) {
  corio::join_set<int> set;
  for (int i = 1; i <= children; ++i) {
    set.spawn([](int value) -> corio::task<int> {
      co_await corio::yield();
      co_return value;
    }(i));
  }
  int taken = 0;
  long sum = 0;
  for (int round = 0; !set.empty() && round < 4 * children; ++round) {
    if (round % 2 == 0) {
      auto first = co_await corio::when_any(set.next(), corio::sleep_for(2us));
      if (first.index() == 0) {
        ++taken;
        sum += *std::get<0>(first);
      }
    } else {
      try {
        auto value = co_await corio::with_timeout(2us, set.next());
        ++taken;
        sum += *value;
      } catch (const corio::timed_out&) {
      }
    }
  }
  while (auto value = co_await set.next()) {
    ++taken;
    sum += *value;
  }
  co_return std::pair<int, long>{taken, sum};
}

TEST(join_set, a_next_that_loses_a_when_any_or_times_out_takes_no_result) {
  corio::runtime rt(two_workers());
  constexpr int children = 20000;
  for (int batch = 0; batch < 8; ++batch) {
    auto [taken, sum] = rt.block_on(take_all_racing_timers(children));
    EXPECT_EQ(taken, children) << "batch " << batch;
    EXPECT_EQ(sum, long{children} * (children + 1) / 2) << "batch " << batch;
  }
}
