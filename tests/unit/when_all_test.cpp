#include <corio/event_loop.hpp>
#include <corio/sync_wait.hpp>
#include <corio/task.hpp>
#include <corio/when_all.hpp>
#include <corio/when_any.hpp>

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace {

corio::task<int> value_after_yields(int value, int yields) {
  for (int i = 0; i < yields; ++i) {
    co_await corio::yield();
  }
  co_return value;
}

TEST(when_all, collects_heterogeneous_results_in_a_tuple) {
  auto text = []() -> corio::task<std::string> { co_return "x"; };
  auto nothing = []() -> corio::task<void> { co_return; };
  auto [number, word, unit] = corio::sync_wait(corio::when_all(value_after_yields(3, 0), text(), nothing()));
  EXPECT_EQ(number, 3);
  EXPECT_EQ(word, "x");
  EXPECT_EQ(unit, std::monostate{});
}

// Operands that yield references give std::reference_wrapper to the same objects, in when_all and
// in when_any (a user trial found neither compiled with task<T&>).
TEST(when_all, references_come_back_as_reference_wrappers_to_the_same_objects) {
  int a = 1;
  int b = 2;
  auto ref = [](int& to) -> corio::task<int&> { co_return to; };
  auto [first, second] = corio::sync_wait(corio::when_all(ref(a), ref(b)));
  first.get() = 10;
  EXPECT_EQ(a, 10);
  EXPECT_EQ(&second.get(), &b);
  // Biased: under sync_wait the yields do not suspend, so the second operand, started first, would win.
  auto winner = corio::sync_wait(corio::when_any_biased(ref(a), value_after_yields(3, 5)));
  ASSERT_EQ(winner.index(), 0u);
  EXPECT_EQ(&std::get<0>(winner).get(), &a);
  std::vector<corio::task<int&>> refs;
  refs.push_back(ref(a));
  refs.push_back(ref(b));
  auto both = corio::sync_wait(corio::when_all(std::move(refs)));  // the range form did not compile
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(&both[0].get(), &a);
  EXPECT_EQ(&both[1].get(), &b);
}

TEST(when_all, runs_operands_concurrently_on_a_loop) {
  corio::event_loop loop;
  std::vector<int> order;
  auto step = [&](int id, int yields) -> corio::task<int> {
    for (int i = 0; i < yields; ++i) {
      order.push_back(id);
      co_await corio::yield();
    }
    co_return id;
  };
  std::tuple<int, int> result;
  auto parent = [&]() -> corio::task<void> { result = co_await corio::when_all(step(1, 2), step(2, 2)); };
  loop.spawn(parent());
  loop.run_until_idle();
  EXPECT_EQ(result, std::make_tuple(1, 2));
  EXPECT_EQ(order, (std::vector<int>{1, 2, 1, 2}));
}

TEST(when_all, range_form_returns_results_in_order) {
  corio::event_loop loop;
  std::vector<int> results;
  auto parent = [&]() -> corio::task<void> {
    std::vector<corio::task<int>> tasks;
    for (int i = 0; i < 10; ++i) {
      tasks.push_back(value_after_yields(i, 10 - i));
    }
    results = co_await corio::when_all(std::move(tasks));
  };
  loop.spawn(parent());
  loop.run_until_idle();
  EXPECT_EQ(results, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(when_all, rethrows_first_failure_after_all_finish) {
  corio::event_loop loop;
  bool slow_finished = false;
  auto slow = [&]() -> corio::task<int> {
    co_await corio::yield();
    co_await corio::yield();
    slow_finished = true;
    co_return 1;
  };
  auto failing = []() -> corio::task<int> {
    co_await corio::yield();
    throw std::runtime_error("first");
  };
  bool caught = false;
  auto parent = [&]() -> corio::task<void> {
    try {
      co_await corio::when_all(slow(), failing());
    } catch (const std::runtime_error&) {
      caught = true;
    }
  };
  loop.spawn(parent());
  loop.run_until_idle();
  EXPECT_TRUE(caught);
  EXPECT_TRUE(slow_finished);
}

TEST(when_all, empty_range_completes_immediately) {
  std::vector<corio::task<void>> none;
  EXPECT_NO_THROW(corio::sync_wait(corio::when_all(std::move(none))));
}

TEST(when_all, many_synchronous_operands_do_not_overflow_the_stack) {
  auto ready = []() -> corio::task<int> { co_return 1; };
  std::vector<corio::task<int>> tasks;
  for (int i = 0; i < 100'000; ++i) {
    tasks.push_back(ready());
  }
  auto results = corio::sync_wait(corio::when_all(std::move(tasks)));
  EXPECT_EQ(results.size(), 100'000u);
}

}  // namespace
