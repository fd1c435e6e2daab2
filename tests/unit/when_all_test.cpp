#include <corio/channel.hpp>
#include <corio/errors.hpp>
#include <corio/event.hpp>
#include <corio/event_loop.hpp>
#include <corio/runtime.hpp>
#include <corio/sync_wait.hpp>
#include <corio/time.hpp>
#include <corio/task.hpp>
#include <corio/when_all.hpp>
#include <corio/when_any.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
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

// The first failure stops the other operands (each ends cancelled at its next cancellation point),
// and is rethrown only once they have all ended.
TEST(when_all, a_failure_stops_the_other_operands_and_is_rethrown_once_they_have_ended) {
  corio::event_loop loop;
  int slow_steps = 0;
  bool slow_cancelled = false;
  std::vector<std::string> ended;
  auto slow = [&]() -> corio::task<int> {
    try {
      for (int i = 0; i < 1000; ++i) {
        ++slow_steps;
        co_await corio::yield();
      }
    } catch (const corio::cancelled&) {
      slow_cancelled = true;
      ended.push_back("slow");
      throw;
    }
    co_return 1;
  };
  auto failing = []() -> corio::task<int> {
    co_await corio::yield();
    throw std::runtime_error("first");
  };
  std::string caught;
  auto parent = [&]() -> corio::task<void> {
    try {
      co_await corio::when_all(slow(), failing());
    } catch (const std::runtime_error& failure) {
      caught = failure.what();
      ended.push_back("parent");
    }
  };
  loop.spawn(parent());
  loop.run_until_idle();
  EXPECT_EQ(caught, "first");
  EXPECT_TRUE(slow_cancelled);
  EXPECT_LE(slow_steps, 3);  // it ran on for a result when_all drops: 1000
  EXPECT_EQ(ended, (std::vector<std::string>{"slow", "parent"}));
}

// An operand that waits for something that never comes (an event nobody sets) no longer keeps a
// failed when_all waiting forever, in either form.
TEST(when_all, an_operand_that_waits_forever_does_not_keep_a_failed_when_all_waiting) {
  corio::event_loop loop;
  corio::event never;
  auto waits = [&]() -> corio::task<void> { co_await never.wait(); };
  auto fails = []() -> corio::task<void> {
    co_await corio::yield();
    throw std::runtime_error("failed");
  };
  int caught = 0;
  auto parent = [&]() -> corio::task<void> {
    try {
      co_await corio::when_all(waits(), fails(), waits());
    } catch (const std::runtime_error&) {
      ++caught;
    }
    std::vector<corio::task<void>> tasks;
    tasks.push_back(waits());
    tasks.push_back(fails());
    tasks.push_back(waits());
    try {
      co_await corio::when_all(std::move(tasks));
    } catch (const std::runtime_error&) {
      ++caught;
    }
  };
  loop.spawn(parent());
  loop.run_until_idle();
  EXPECT_EQ(caught, 2);  // 0 or 1: the loop ran out of work with the parent still waiting
}

// The failure rethrown is the one that happened first, not the first listed: here the first operand
// turns the cancellation that the second one's failure caused into a failure of its own.
TEST(when_all, the_failure_rethrown_is_the_first_to_happen_not_the_first_listed) {
  corio::event_loop loop;
  auto fails_when_stopped = []() -> corio::task<int> {
    try {
      for (;;) {
        co_await corio::yield();
      }
    } catch (const corio::cancelled&) {
    }
    throw std::runtime_error("second");
  };
  auto fails_at_once = []() -> corio::task<int> { throw std::runtime_error("first"); co_return 0; };
  std::string caught;
  auto parent = [&]() -> corio::task<void> {
    try {
      co_await corio::when_all(fails_when_stopped(), fails_at_once());
    } catch (const std::runtime_error& failure) {
      caught = failure.what();
    }
    std::vector<corio::task<int>> tasks;
    tasks.push_back(fails_when_stopped());
    tasks.push_back(fails_at_once());
    try {
      co_await corio::when_all(std::move(tasks));
    } catch (const std::runtime_error& failure) {
      caught += std::string(" ") + failure.what();
    }
  };
  loop.spawn(parent());
  loop.run_until_idle();
  EXPECT_EQ(caught, "first first");
}

// On a runtime, operands blocked in channel receives are woken by a failure that comes from a timer,
// and their results (none) and the failure reach the awaiting task; no receive is left linked.
TEST(when_all, on_a_runtime_a_timed_failure_ends_operands_blocked_on_channels) {
  corio::runtime rt(corio::runtime::options{.workers = 2, .max_blocking_threads = 64});
  for (int round = 0; round < 20; ++round) {
    auto [tx, rx] = corio::channel<int>(1);
    auto receives = [](corio::receiver<int> from) -> corio::task<void> { (void)co_await from.recv(); };
    auto fails = []() -> corio::task<void> {
      co_await corio::sleep_for(std::chrono::microseconds(200));
      throw std::runtime_error("timed");
    };
    std::vector<corio::task<void>> tasks;
    for (int i = 0; i < 8; ++i) {
      tasks.push_back(receives(rx));
    }
    tasks.push_back(fails());
    EXPECT_THROW(rt.block_on(corio::when_all(std::move(tasks))), std::runtime_error);
    // Had a receive stayed linked, it would take the value: it stays in the buffer for try_recv.
    EXPECT_EQ(tx.try_send(1), corio::channel_status::ok);
    EXPECT_EQ(rx.try_recv().value, std::optional<int>(1));
  }
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
