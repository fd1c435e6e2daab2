#include <corio/event.hpp>
#include <corio/event_loop.hpp>
#include <corio/task.hpp>
#include <corio/time.hpp>
#include <corio/watch.hpp>
#include <corio/when_all.hpp>
#include <corio/when_any.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <vector>

#include "support/cancel.hpp"

namespace {

// changed() goes into with_timeout and when_any (a user trial found neither compiled): a timed-out or
// losing changed() marks nothing seen, so the next one still sees the change.
TEST(watch, changed_goes_into_with_timeout_and_when_any_and_a_cancelled_one_marks_nothing_seen) {
  auto [tx, rx] = corio::watch<int>(0);
  corio::event other;
  corio::event_loop loop;
  int seen = loop.block_on([&]() -> corio::task<int> {
    bool timed_out = false;
    try {
      (void)co_await corio::with_timeout(std::chrono::milliseconds(5), rx.changed());
    } catch (const corio::timed_out&) {
      timed_out = true;
    }
    EXPECT_TRUE(timed_out);
    other.set();
    auto first = co_await corio::when_any(other.wait(), rx.changed());  // nothing changed: the event wins
    EXPECT_EQ(first.index(), 0u);
    tx.send(7);
    EXPECT_TRUE(co_await corio::with_timeout(std::chrono::seconds(10), rx.changed()));
    co_return rx.borrow();
  });
  EXPECT_EQ(seen, 7);
  EXPECT_FALSE(rx.has_changed());
}

// A receiver keeps one seen version, so two changed() in flight on it would both wake for one send and
// the second would report the sender gone (it did before the fix). The second one to start is refused;
// a copy of the receiver is how to wait twice.
TEST(watch, a_second_changed_in_flight_on_one_receiver_is_refused_and_a_copy_may_wait_beside_it) {
  auto [tx, rx] = corio::watch<int>(0);
  corio::event_loop loop;
  std::string refused;
  std::vector<bool> got;
  loop.spawn([](corio::watch_receiver<int>& rx, std::string& refused, std::vector<bool>& got) -> corio::task<void> {
    try {
      (void)co_await corio::when_all(rx.changed(), rx.changed());
    } catch (const std::logic_error& e) {
      refused = e.what();
    }
    auto copy = rx;
    auto [mine, theirs] = co_await corio::when_all(rx.changed(), copy.changed());
    got.push_back(mine);
    got.push_back(theirs);
  }(rx, refused, got));
  loop.run_until_idle();
  tx.send(1);
  loop.run_until_idle();
  EXPECT_NE(refused.find("corio::watch_receiver::changed"), std::string::npos) << refused;
  tx.send(2);  // the sender lives: both waits must say a value changed
  loop.run_until_idle();
  EXPECT_EQ(got, (std::vector<bool>{true, true}));
  EXPECT_EQ(rx.borrow(), 2);
}

TEST(watch, receivers_start_with_the_initial_value_seen) {
  auto [tx, rx] = corio::watch<std::string>("initial");
  EXPECT_EQ(rx.borrow(), "initial");
  EXPECT_FALSE(rx.has_changed());
  tx.send("next");
  EXPECT_TRUE(rx.has_changed());
  EXPECT_EQ(rx.borrow_and_update(), "next");
  EXPECT_FALSE(rx.has_changed());
}

TEST(watch, send_tells_whether_any_receiver_is_left_and_the_sender_counts_them) {
  auto [tx, rx] = corio::watch<int>(0);
  EXPECT_EQ(tx.receiver_count(), 1u);
  auto copy = rx;
  EXPECT_EQ(tx.receiver_count(), 2u);
  EXPECT_TRUE(tx.send(1));
  {
    auto gone = std::move(rx);
    auto also_gone = std::move(copy);
  }
  EXPECT_EQ(tx.receiver_count(), 0u);
  EXPECT_FALSE(tx.send(2));
  EXPECT_EQ(tx.subscribe().borrow(), 2);  // stored anyway, for a later subscriber
}

TEST(watch, changed_wakes_every_waiting_receiver_and_they_see_only_the_latest) {
  auto [tx, rx] = corio::watch<int>(0);
  corio::event_loop loop;
  std::vector<int> seen;
  for (int i = 0; i < 3; ++i) {
    loop.spawn([](corio::watch_receiver<int> rx, std::vector<int>& seen) -> corio::task<void> {
      EXPECT_TRUE(co_await rx.changed());
      seen.push_back(rx.borrow());
    }(rx, seen));
  }
  loop.run_until_idle();
  EXPECT_TRUE(seen.empty());
  tx.send(1);
  tx.send(2);  // before the receivers run: they see 2 only
  loop.run_until_idle();
  EXPECT_EQ(seen, (std::vector<int>{2, 2, 2}));
}

TEST(watch, changed_completes_at_once_if_a_newer_value_is_there_and_marks_it_seen) {
  auto [tx, rx] = corio::watch<int>(0);
  tx.send(5);
  corio::event_loop loop;
  int completions = 0;
  loop.spawn([](corio::watch_receiver<int> rx, int& completions) -> corio::task<void> {
    EXPECT_TRUE(co_await rx.changed());
    ++completions;
    EXPECT_FALSE(rx.has_changed());
    (void)co_await rx.changed();  // parks: nothing newer
    ++completions;
  }(rx, completions));
  loop.run_until_idle();
  EXPECT_EQ(completions, 1);
  tx.send(6);
  loop.run_until_idle();
  EXPECT_EQ(completions, 2);
}

TEST(watch, changed_returns_false_once_the_sender_is_gone) {
  auto [tx, rx] = corio::watch<int>(0);
  corio::event_loop loop;
  bool result = true;
  loop.spawn([](corio::watch_receiver<int> rx, bool& result) -> corio::task<void> {
    result = co_await rx.changed();
  }(rx, result));
  loop.run_until_idle();
  { auto gone = std::move(tx); }
  loop.run_until_idle();
  EXPECT_FALSE(result);
  EXPECT_EQ(rx.borrow(), 0);  // the last value stays readable
}

TEST(watch, a_cancelled_wait_throws_cancelled_and_misses_nothing) {
  auto [tx, rx] = corio::watch<int>(0);
  corio::event_loop loop;
  std::stop_source stop;
  std::stop_token token = stop.get_token();
  loop.spawn(corio::test::cancellable_by(token, [](corio::watch_receiver<int>& rx) -> corio::task<void> {
    EXPECT_THROW((void)co_await rx.changed(), corio::cancelled);
  }(rx)));
  loop.run_until_idle();
  stop.request_stop();
  loop.run_until_idle();
  tx.send(1);
  EXPECT_TRUE(rx.has_changed());
}

TEST(watch, moved_from_handles_throw_invalid_channel) {
  auto [tx, rx] = corio::watch<int>(0);
  auto tx2 = std::move(tx);
  auto rx2 = std::move(rx);
  EXPECT_THROW(tx.send(1), corio::invalid_channel);
  EXPECT_THROW((void)rx.borrow(), corio::invalid_channel);
  EXPECT_THROW((void)rx.changed(), corio::invalid_channel);
}

}  // namespace
