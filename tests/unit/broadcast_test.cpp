#include <corio/broadcast.hpp>
#include <corio/errors.hpp>
#include <corio/event.hpp>
#include <corio/event_loop.hpp>
#include <corio/join_handle.hpp>
#include <corio/runtime.hpp>
#include <corio/task.hpp>
#include <corio/time.hpp>
#include <corio/when_all.hpp>
#include <corio/yield.hpp>
#include <corio/when_any.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

namespace {

using result = corio::broadcast_result<int>;

TEST(broadcast, every_receiver_sees_every_message_in_order) {
  auto [tx, rx] = corio::broadcast<int>(8);
  auto rx2 = tx.subscribe();
  corio::event_loop loop;
  std::vector<int> got[2];
  auto reader = [](corio::broadcast_receiver<int> rx, std::vector<int>& got) -> corio::task<void> {
    for (;;) {
      auto r = co_await rx.recv();
      if (auto* value = std::get_if<int>(&r)) {
        got.push_back(*value);
      } else {
        EXPECT_TRUE(std::holds_alternative<corio::broadcast_closed>(r));
        break;
      }
    }
  };
  loop.spawn(reader(std::move(rx), got[0]));
  loop.spawn(reader(std::move(rx2), got[1]));
  loop.run_until_idle();
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(tx.send(int{i}));
    loop.run_until_idle();
  }
  { auto gone = std::move(tx); }
  loop.run_until_idle();
  EXPECT_EQ(got[0], (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(got[1], got[0]);
}

TEST(broadcast, a_receiver_that_falls_behind_gets_the_exact_number_missed_then_continues) {
  auto [tx, rx] = corio::broadcast<int>(4);
  for (int i = 0; i < 10; ++i) {
    EXPECT_TRUE(tx.send(int{i}));
  }
  EXPECT_EQ(rx.try_recv(), result(corio::lagged{6}));  // 0..5 were overwritten
  for (int i = 6; i < 10; ++i) {
    EXPECT_EQ(rx.try_recv(), result(i));
  }
  EXPECT_EQ(rx.try_recv(), std::nullopt);
}

TEST(broadcast, a_new_subscriber_sees_only_later_messages) {
  auto [tx, rx] = corio::broadcast<int>(4);
  EXPECT_TRUE(tx.send(1));
  auto late = tx.subscribe();
  EXPECT_TRUE(tx.send(2));
  EXPECT_EQ(late.try_recv(), result(2));
  EXPECT_EQ(rx.try_recv(), result(1));
}

TEST(broadcast, send_without_receivers_fails_and_keeps_the_value) {
  auto [tx, rx] = corio::broadcast<std::string>(2);
  { auto gone = std::move(rx); }
  std::string value = "kept";
  EXPECT_FALSE(tx.send(std::move(value)));
  EXPECT_EQ(value, "kept");
}

TEST(broadcast, receivers_drain_then_see_closed_when_the_last_sender_goes) {
  auto [tx, rx] = corio::broadcast<int>(2);
  auto tx2 = tx;
  EXPECT_TRUE(tx.send(1));
  { auto gone = std::move(tx); }
  EXPECT_TRUE(tx2.send(2));
  { auto gone = std::move(tx2); }
  EXPECT_EQ(rx.try_recv(), result(1));
  EXPECT_EQ(rx.try_recv(), result(2));
  EXPECT_EQ(rx.try_recv(), result(corio::broadcast_closed{}));
}

TEST(broadcast, recv_goes_into_when_any_and_a_recv_cancelled_while_waiting_skips_nothing) {
  auto [tx, rx] = corio::broadcast<int>(8);
  corio::event loser_wins;
  corio::event_loop loop;
  std::vector<std::size_t> winners;
  std::vector<int> got;
  loop.spawn([](corio::broadcast_receiver<int>& rx, corio::event& other, std::vector<std::size_t>& winners,
                std::vector<int>& got) -> corio::task<void> {
    // Biased: the event is looked at first, so a recv that started second is what loses.
    auto first = co_await corio::when_any_biased(other.wait(), rx.recv());  // the event wins: no message yet
    winners.push_back(first.index());
    auto second = co_await corio::when_any_biased(other.wait(), rx.recv());  // the event is still set
    winners.push_back(second.index());
    for (int i = 0; i < 2; ++i) {
      auto r = co_await rx.recv();  // the message sent meanwhile was not taken by the losers
      got.push_back(std::get<int>(r));
    }
  }(rx, loser_wins, winners, got));
  loop.run_until_idle();
  EXPECT_TRUE(winners.empty());
  loser_wins.set();
  EXPECT_TRUE(tx.send(7));
  EXPECT_TRUE(tx.send(8));
  loop.run_until_idle();
  EXPECT_EQ(winners, (std::vector<std::size_t>{0, 0}));
  EXPECT_EQ(got, (std::vector<int>{7, 8}));
}

TEST(broadcast, recv_under_with_timeout_times_out_then_reads_what_comes_later) {
  auto [tx, rx] = corio::broadcast<int>(8);
  corio::event_loop loop;
  int value = loop.block_on([&]() -> corio::task<int> {
    bool timed_out = false;
    try {
      (void)co_await corio::with_timeout(std::chrono::milliseconds(5), rx.recv());
    } catch (const corio::timed_out&) {
      timed_out = true;
    }
    EXPECT_TRUE(timed_out);
    EXPECT_TRUE(tx.send(42));
    auto r = co_await corio::with_timeout(std::chrono::seconds(10), rx.recv());
    co_return std::get<int>(r);
  });
  EXPECT_EQ(value, 42);
}

// A receiver keeps one position, so two receives in flight on it would both wake for one message and
// the second would find it gone (it read an empty slot before the fix). The second one to start is
// refused; a copy of the receiver is how to wait twice.
TEST(broadcast, a_second_recv_in_flight_on_one_receiver_is_refused_and_a_copy_may_wait_beside_it) {
  auto [tx, rx] = corio::broadcast<int>(8);
  corio::event_loop loop;
  std::string refused;
  std::vector<int> got;
  loop.spawn([](corio::broadcast_receiver<int>& rx, std::string& refused, std::vector<int>& got) -> corio::task<void> {
    try {
      (void)co_await corio::when_all(rx.recv(), rx.recv());
    } catch (const std::logic_error& e) {
      refused = e.what();
    }
    auto copy = rx;
    auto [mine, theirs] = co_await corio::when_all(rx.recv(), copy.recv());
    got.push_back(std::get<int>(mine));
    got.push_back(std::get<int>(theirs));
  }(rx, refused, got));
  loop.run_until_idle();
  EXPECT_NE(refused.find("corio::broadcast_receiver::recv"), std::string::npos) << refused;
  // The refusal stopped the pair's first recv before any message came (when_all stops its other
  // operands at the first failure), so none is taken and dropped: both copies get the first one.
  EXPECT_TRUE(tx.send(1));
  loop.run_until_idle();
  EXPECT_EQ(got, (std::vector<int>{1, 1}));
}

// The same on a runtime, where when_all's two receives may run on two workers: the second either is
// refused or starts after the first has taken its message, so the two never take one message.
TEST(broadcast, two_receives_on_one_receiver_on_a_runtime_never_take_one_message_twice) {
  auto [tx, rx] = corio::broadcast<int>(1024);
  corio::runtime rt(corio::runtime::options{.workers = 2});
  int both_taken = 0;
  rt.block_on([](corio::broadcast_sender<int>& tx, corio::broadcast_receiver<int>& rx, int& both_taken) -> corio::task<void> {
    for (int round = 0; round < 200; ++round) {
      auto sender = corio::spawn([](corio::broadcast_sender<int>& tx, int round) -> corio::task<void> {
        co_await corio::yield();
        tx.send(2 * round);
        tx.send(2 * round + 1);
      }(tx, round));
      try {
        auto [a, b] = co_await corio::when_all(rx.recv(), rx.recv());
        EXPECT_NE(std::get<int>(a), std::get<int>(b));
        ++both_taken;
      } catch (const std::logic_error&) {
      }
      co_await std::move(sender);
      while (rx.try_recv()) {
      }
    }
  }(tx, rx, both_taken));
  EXPECT_LE(both_taken, 200);
}

// A message stayed in the ring after every receiver had read it, and after every receiver was gone,
// until a later send overwrote it: what it held (a buffer, a connection, a reply handle) lived on (a
// review). It now goes with its last reader.
TEST(broadcast, a_message_is_destroyed_once_every_receiver_read_it_or_is_gone) {
  using message = std::shared_ptr<int>;
  auto [tx, rx] = corio::broadcast<message>(8);
  auto rx2 = tx.subscribe();
  auto shared = std::make_shared<int>(1);
  ASSERT_TRUE(tx.send(shared));
  EXPECT_EQ(shared.use_count(), 2);  // here and in the ring
  ASSERT_TRUE(rx.try_recv().has_value());
  EXPECT_EQ(shared.use_count(), 2) << "rx2 has yet to read it";
  auto copy_of_rx2 = rx2;  // continues from rx2's position: a third reader
  ASSERT_TRUE(rx2.try_recv().has_value());
  EXPECT_EQ(shared.use_count(), 2) << "the copy has yet to read it";
  {
    std::optional<corio::broadcast_result<message>> last = copy_of_rx2.try_recv();
    ASSERT_TRUE(last.has_value());
    EXPECT_EQ(std::get<message>(*last), shared);
    EXPECT_EQ(shared.use_count(), 2) << "the ring let go: only here and in what the last reader got";
  }
  EXPECT_EQ(shared.use_count(), 1);

  ASSERT_TRUE(tx.send(shared));
  ASSERT_TRUE(tx.send(shared));
  EXPECT_EQ(shared.use_count(), 3);
  rx = {};
  rx2 = {};
  EXPECT_EQ(shared.use_count(), 3) << "copy_of_rx2 has yet to read both";
  copy_of_rx2 = {};
  EXPECT_EQ(shared.use_count(), 1) << "no receiver is left to read them";
}

TEST(broadcast, misuse_is_reported) {
  EXPECT_THROW((void)corio::broadcast<int>(0), std::invalid_argument);
  auto [tx, rx] = corio::broadcast<int>(1);
  auto rx2 = std::move(rx);
  EXPECT_THROW((void)rx.recv(), corio::invalid_channel);
  EXPECT_THROW((void)rx.try_recv(), corio::invalid_channel);
}

}  // namespace
