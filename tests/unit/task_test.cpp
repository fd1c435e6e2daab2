#include <corio/event_loop.hpp>
#include <corio/sync_wait.hpp>
#include <corio/task.hpp>
#include <corio/time.hpp>
#include <corio/when_all.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>

#include "support/lifetime.hpp"

namespace {

corio::task<int> forty_two() { co_return 42; }

corio::task<void> no_op() { co_return; }

corio::task<int> add_one(corio::task<int> inner) { co_return co_await std::move(inner) + 1; }

TEST(task, returns_value_to_awaiter) { EXPECT_EQ(corio::sync_wait(add_one(forty_two())), 43); }

TEST(task, is_lazy_until_awaited) {
  bool started = false;
  auto body = [&]() -> corio::task<void> {
    started = true;
    co_return;
  };
  corio::task<void> t = body();
  EXPECT_FALSE(started);
  corio::sync_wait(std::move(t));
  EXPECT_TRUE(started);
}

TEST(task, propagates_exception_to_awaiter) {
  auto failing = []() -> corio::task<int> {
    throw std::runtime_error("boom");
    co_return 0;
  };
  auto outer = [&]() -> corio::task<std::string> {
    try {
      co_await failing();
    } catch (const std::runtime_error& error) {
      co_return error.what();
    }
    co_return "no exception";
  };
  EXPECT_EQ(corio::sync_wait(outer()), "boom");
}

TEST(task, reference_result_refers_to_the_same_object) {
  int target = 1;
  auto ref = [&]() -> corio::task<int&> { co_return target; };
  int& result = corio::sync_wait(ref());
  EXPECT_EQ(&result, &target);
}

TEST(task, move_only_result_is_moved_out) {
  auto make = []() -> corio::task<std::unique_ptr<int>> { co_return std::make_unique<int>(7); };
  std::unique_ptr<int> value = corio::sync_wait(make());
  ASSERT_NE(value, nullptr);
  EXPECT_EQ(*value, 7);
}

TEST(task, awaiting_moved_from_task_throws_invalid_task) {
  corio::task<int> original = forty_two();
  corio::task<int> moved = std::move(original);
  auto await_it = [&]() -> corio::task<void> { co_await original; };
  EXPECT_THROW(corio::sync_wait(await_it()), corio::invalid_task);
  EXPECT_EQ(corio::sync_wait(std::move(moved)), 42);
}

TEST(task, invalid_task_is_a_logic_error) {
  corio::task<void> empty;
  EXPECT_THROW(corio::sync_wait(std::move(empty)), std::logic_error);
}

TEST(task, awaiting_a_task_twice_throws_invalid_task) {
  corio::task<int> once = forty_two();
  auto await_twice = [&]() -> corio::task<int> {
    int first = co_await once;
    int second = co_await once;
    co_return first + second;
  };
  EXPECT_THROW(corio::sync_wait(await_twice()), corio::invalid_task);
}

TEST(task, destroying_unawaited_task_destroys_its_frame_and_arguments) {
  corio::test::lifetime_counts counts;
  {
    auto holder = [](corio::test::counted) -> corio::task<void> { co_return; };
    corio::task<void> t = holder(corio::test::counted(counts));
    EXPECT_GE(counts.alive.load(), 1);
  }
  EXPECT_EQ(counts.alive.load(), 0);
}

TEST(task, result_is_moved_not_copied) {
  corio::test::lifetime_counts counts;
  auto make = [&]() -> corio::task<corio::test::counted> { co_return corio::test::counted(counts, 5); };
  {
    corio::test::counted value = corio::sync_wait(make());
    EXPECT_EQ(value.value(), 5);
  }
  EXPECT_EQ(counts.copies.load(), 0);
  EXPECT_EQ(counts.alive.load(), 0);
}

// g++ 12 compiles symmetric transfer as a call, not a tail call, at -O0 and under the sanitizers;
// this loop overflows the stack unless synchronous completion is handled without nesting.
TEST(task, ten_million_synchronously_completing_awaits_do_not_overflow_the_stack) {
  auto loop = []() -> corio::task<long> {
    long total = 0;
    for (int i = 0; i < 10'000'000; ++i) {
      total += co_await forty_two();
    }
    co_return total;
  };
  EXPECT_EQ(corio::sync_wait(loop()), 420'000'000L);
}

TEST(task, deep_recursion_of_awaits_completes) {
  struct recurse {
    static corio::task<int> depth(int n) {
      if (n == 0) {
        co_return 0;
      }
      co_return 1 + co_await depth(n - 1);
    }
  };
  EXPECT_EQ(corio::sync_wait(recurse::depth(10'000)), 10'000);
}

TEST(task, void_task_completes) { EXPECT_NO_THROW(corio::sync_wait(no_op())); }

TEST(task, valid_reports_awaitable_state) {
  corio::task<int> t = forty_two();
  EXPECT_TRUE(t.valid());
  auto await_it = [&]() -> corio::task<int> { co_return co_await t; };
  EXPECT_EQ(corio::sync_wait(await_it()), 42);
  EXPECT_FALSE(t.valid());
  corio::task<int> empty;
  EXPECT_FALSE(empty.valid());
}

// The first await still suspended, a second one resumed the task from where it was parked (its sleep
// cut short) and then hung (a review).
TEST(task, awaiting_a_task_that_is_already_being_awaited_throws_invalid_task) {
  corio::event_loop loop;
  int resumed = 0;
  auto slow = [](int& resumed) -> corio::task<int> {
    co_await corio::sleep_for(std::chrono::milliseconds(20));
    ++resumed;
    co_return 1;
  };
  corio::task<int> shared = slow(resumed);
  auto await_it = [](corio::task<int>& t) -> corio::task<int> { co_return co_await t; };
  auto both = [&]() -> corio::task<void> {
    (void)co_await corio::when_all(await_it(shared), await_it(shared));
  };
  EXPECT_THROW(loop.block_on(both()), corio::invalid_task);
  EXPECT_LE(resumed, 1);  // resumed by its sleep once at most (when_all may cancel it), never twice
}

}  // namespace
