#include <corio/event_loop.hpp>
#include <corio/oneshot.hpp>
#include <corio/select.hpp>
#include <corio/task.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <optional>

#include "support/loops.hpp"

namespace {

using namespace std::chrono_literals;
using corio::test::run_on_loop;

TEST(oneshot, the_value_sent_reaches_a_waiting_receiver) {
  auto [tx, rx] = corio::oneshot<int>();
  corio::event_loop loop;
  std::optional<int> got;
  loop.spawn([](corio::oneshot_receiver<int> rx, std::optional<int>& got) -> corio::task<void> {
    got = co_await rx;
  }(std::move(rx), got));
  loop.run_until_idle();
  EXPECT_TRUE(tx.send(42));
  loop.run_until_idle();
  EXPECT_EQ(got, 42);
}

TEST(oneshot, a_sender_dropped_without_sending_wakes_the_receiver_with_nullopt) {
  auto [tx, rx] = corio::oneshot<int>();
  corio::event_loop loop;
  bool done = false;
  loop.spawn([](corio::oneshot_receiver<int> rx, bool& done) -> corio::task<void> {
    EXPECT_EQ(co_await rx, std::nullopt);
    done = true;
  }(std::move(rx), done));
  loop.run_until_idle();
  { auto gone = std::move(tx); }
  loop.run_until_idle();
  EXPECT_TRUE(done);
}

TEST(oneshot, send_after_the_receiver_is_gone_fails_and_keeps_the_value) {
  auto [tx, rx] = corio::oneshot<std::unique_ptr<int>>();
  { auto gone = std::move(rx); }
  EXPECT_TRUE(tx.is_closed());
  auto value = std::make_unique<int>(3);
  EXPECT_FALSE(tx.send(std::move(value)));
  EXPECT_TRUE(value != nullptr);
}

TEST(oneshot, the_sender_is_spent_by_send) {
  auto [tx, rx] = corio::oneshot<int>();
  EXPECT_TRUE(tx.send(1));
  EXPECT_FALSE(tx);
  try {
    tx.send(2);
    ADD_FAILURE() << "a second send did not throw";
  } catch (const corio::invalid_channel& e) {
    EXPECT_NE(std::string(e.what()).find("oneshot_sender::send: the sender is spent"), std::string::npos) << e.what();
  }
  EXPECT_EQ(rx.try_recv().value, 1);
  EXPECT_EQ(rx.try_recv().status, corio::channel_status::closed);
}

// An lvalue is sent as a copy, and a spent sender reports closed instead of throwing (a user trial
// found the first did not compile and the second threw a message about a moved-from handle).
TEST(oneshot, an_lvalue_is_sent_as_a_copy_and_a_spent_sender_is_closed) {
  auto [tx, rx] = corio::oneshot<std::string>();
  EXPECT_FALSE(tx.is_closed());
  const std::string reply = "done";
  EXPECT_TRUE(tx.send(reply));
  EXPECT_EQ(reply, "done");
  EXPECT_TRUE(tx.is_closed());
  EXPECT_EQ(rx.try_recv().value, "done");
  auto [tx2, rx2] = corio::oneshot<int>();
  rx2 = {};
  EXPECT_TRUE(tx2.is_closed());  // the receiver is gone
}

TEST(oneshot, a_reply_can_be_awaited_with_a_timeout_in_select) {
  auto [tx, rx] = corio::oneshot<int>();
  run_on_loop([&]() -> corio::task<void> {
    auto r = co_await corio::select(rx.recv(), corio::after(5ms));
    EXPECT_EQ(r.index(), 1u);  // nobody replied in time
  });
  EXPECT_TRUE(tx.send(9));  // the select left nothing parked; the value waits in the slot
  EXPECT_EQ(rx.try_recv().value, 9);
}

}  // namespace
