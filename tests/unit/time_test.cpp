#include <corio/cancellation.hpp>
#include <corio/event_loop.hpp>
#include <corio/runtime.hpp>
#include <corio/sync_wait.hpp>
#include <corio/task.hpp>
#include <corio/time.hpp>
#include <corio/when_all.hpp>
#include <corio/when_any.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <exception>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

#include "support/loops.hpp"

namespace {

using corio::test::run_on_loop;

TEST(time, sleep_for_waits_at_least_the_duration) {
  corio::clock::duration slept{};
  run_on_loop([&]() -> corio::task<void> {
    auto start = corio::clock::now();
    co_await corio::sleep_for(20ms);
    slept = corio::clock::now() - start;
  });
  EXPECT_GE(slept, 20ms);
}

TEST(time, sleepers_wake_in_deadline_order) {
  std::vector<int> order;
  run_on_loop([&]() -> corio::task<void> {
    auto sleeper = [&](int id, std::chrono::milliseconds d) -> corio::task<void> {
      co_await corio::sleep_for(d);
      order.push_back(id);
    };
    co_await corio::when_all(sleeper(3, 30ms), sleeper(1, 10ms), sleeper(2, 20ms));
  });
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
}

TEST(time, sleep_until_a_past_deadline_completes_promptly) {
  bool done = false;
  run_on_loop([&]() -> corio::task<void> {
    co_await corio::sleep_until(corio::clock::now() - 1s);
    done = true;
  });
  EXPECT_TRUE(done);
}

// A sleep whose deadline has passed completes without a wait (a user trial: it armed a timer and waited
// for its executor's next turn, so in when_all the operand after it ran first, and on a runtime
// when_any_biased of two zero sleeps was won by the second, the one woken last). when_all starts its
// operands in order: a sleep that suspends lets the second operand run before the first goes on.
TEST(time, a_sleep_whose_deadline_passed_goes_on_without_waiting) {
  std::vector<int> order;
  int biased_first_wins = 0;
  run_on_loop([&]() -> corio::task<void> {
    auto after_sleep = [&](int id, corio::clock::time_point deadline) -> corio::task<void> {
      co_await corio::sleep_until(deadline);
      order.push_back(id);
    };
    auto at_once = [&](int id) -> corio::task<void> {
      order.push_back(id);
      co_return;
    };
    co_await corio::when_all(after_sleep(1, corio::clock::now()), at_once(2));
    co_await corio::when_all(after_sleep(3, corio::clock::now() - 1s), at_once(4));
    co_await corio::when_all(after_sleep(5, corio::clock::now() + 20ms), at_once(6));  // a real wait
  });
  corio::runtime runtime(corio::runtime::options{.workers = 1});
  runtime.block_on([&]() -> corio::task<void> {
    for (int round = 0; round < 20; ++round) {
      auto won = co_await corio::when_any_biased(corio::sleep_for(0ms), corio::sleep_for(-1ms));
      biased_first_wins += won.index() == 0 ? 1 : 0;
    }
  }());
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3, 4, 6, 5}));
  EXPECT_EQ(biased_first_wins, 20);
}

// The largest durations mean "no limit" (as tokio's Duration::MAX does): their deadline saturates
// instead of overflowing into the past, where each fired at once (user trial; UBSan saw the overflow).
TEST(time, the_largest_durations_never_expire_and_negative_ones_expire_at_once) {
  run_on_loop([&]() -> corio::task<void> {
    auto start = corio::clock::now();
    EXPECT_THROW(co_await corio::with_timeout(30ms, corio::sleep_for(std::chrono::seconds::max())), corio::timed_out);
    EXPECT_THROW(co_await corio::with_timeout(30ms, corio::sleep_for(std::chrono::hours::max())), corio::timed_out);
    EXPECT_THROW(co_await corio::with_timeout(30ms, corio::sleep_for(std::chrono::duration<double>(1e300))),
                 corio::timed_out);
    EXPECT_GE(corio::clock::now() - start, 90ms);
    auto short_sleep = corio::sleep_for(20ms);
    co_await corio::with_timeout(std::chrono::milliseconds::max(), std::move(short_sleep));  // no timed_out
    auto slept = corio::sleep_for(20ms);
    co_await corio::with_timeout(std::chrono::nanoseconds::max(), std::move(slept));
    start = corio::clock::now();
    co_await corio::sleep_for(-1s);
    co_await corio::sleep_for(std::chrono::seconds::min());
    EXPECT_LT(corio::clock::now() - start, 1s);
  });
}

TEST(time, with_timeout_throws_timed_out_and_cancels_the_operation) {
  bool operation_cancelled = false;
  bool timed_out = false;
  run_on_loop([&]() -> corio::task<void> {
    auto slow = [&]() -> corio::task<int> {
      try {
        co_await corio::sleep_for(10s);
      } catch (const corio::cancelled&) {
        operation_cancelled = true;
        throw;
      }
      co_return 1;
    };
    try {
      co_await corio::with_timeout(10ms, slow());
    } catch (const corio::timed_out&) {
      timed_out = true;
    }
  });
  EXPECT_TRUE(timed_out);
  EXPECT_TRUE(operation_cancelled);
}

TEST(time, with_timeout_passes_through_a_fast_result) {
  int value = 0;
  auto start = corio::clock::now();
  run_on_loop([&]() -> corio::task<void> {
    auto fast = []() -> corio::task<int> {
      co_await corio::sleep_for(1ms);
      co_return 5;
    };
    value = co_await corio::with_timeout(10s, fast());
  });
  EXPECT_EQ(value, 5);
  EXPECT_LT(corio::clock::now() - start, 5s);  // the 10 s timer was cancelled, not waited for
}

// An operation the deadline could not stop (its wait is shielded) ends after the deadline fired: it
// stands as it ended, a value returned and a failure of its own rethrown. The failure was replaced by
// corio::timed_out before the fix.
TEST(time, with_timeout_passes_through_a_late_failure_of_the_operation_s_own) {
  struct its_own : std::exception {};  // not a std::runtime_error, as corio::timed_out is
  run_on_loop([&]() -> corio::task<void> {
    auto late = [](bool fail) -> corio::task<int> {
      co_await corio::shield(corio::sleep_for(30ms));  // past the deadline, which cannot stop it
      if (fail) {
        throw its_own();
      }
      co_return 5;
    };
    EXPECT_EQ(co_await corio::with_timeout(5ms, late(false)), 5);
    EXPECT_THROW((void)co_await corio::with_timeout(5ms, late(true)), its_own);
  });
}

TEST(time, cancelling_a_sleeper_removes_its_timer_and_wakes_it_at_once) {
  auto start = corio::clock::now();
  std::size_t winner = 99;
  run_on_loop([&]() -> corio::task<void> {
    std::vector<corio::task<void>> racers;
    racers.push_back([]() -> corio::task<void> { co_await corio::sleep_for(1h); }());
    racers.push_back([]() -> corio::task<void> { co_await corio::yield(); }());
    winner = co_await corio::when_any(std::move(racers));
  });
  EXPECT_EQ(winner, 1u);
  EXPECT_LT(corio::clock::now() - start, 5s);
}

TEST(time, sleep_without_an_executor_throws_logic_error) {
  auto body = []() -> corio::task<void> { co_await corio::sleep_for(1ms); };
  EXPECT_THROW(corio::sync_wait(body()), std::logic_error);
}

TEST(time, destroying_a_loop_with_sleepers_disarms_their_timers) {
  auto loop = std::make_unique<corio::event_loop>();
  for (int i = 0; i < 100; ++i) {
    loop->spawn([]() -> corio::task<void> { co_await corio::sleep_for(1h); }());
  }
  loop->run_until_idle();
  loop.reset();  // ASan/LSan would flag a timer left pointing into a freed frame
  SUCCEED();
}

TEST(time, a_parked_loop_wakes_for_its_timer) {
  corio::event_loop loop;
  bool woke = false;
  auto sleeper = [&]() -> corio::task<void> {
    co_await corio::sleep_for(30ms);
    woke = true;
    loop.stop();
  };
  loop.spawn(sleeper());
  loop.run();  // parks with the timer's deadline as timeout
  EXPECT_TRUE(woke);
}

}  // namespace
