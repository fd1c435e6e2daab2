#include <corio/channel.hpp>
#include <corio/event_loop.hpp>
#include <corio/select.hpp>
#include <corio/sync_wait.hpp>
#include <corio/task.hpp>
#include <corio/time.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <variant>

#include "support/cancel.hpp"
#include "support/lifetime.hpp"
#include "support/loops.hpp"

namespace {

using namespace std::chrono_literals;
using corio::test::cancellable_by;
using corio::test::run_on_loop;

// A select with no branches is rejected at compile time (the constraint, not a runtime error).
template <class... Branches>
concept can_select = requires(Branches... branches) { corio::select(branches...); };
template <class... Branches>
concept can_select_biased = requires(Branches... branches) { corio::select_biased(branches...); };
static_assert(!can_select<>);
static_assert(!can_select_biased<>);
static_assert(can_select<corio::recv_operation<int>>);

TEST(select, yields_the_ready_branch_index_and_its_value) {
  auto [a_tx, a_rx] = corio::channel<int>(1);
  auto [b_tx, b_rx] = corio::channel<std::string>(1);
  EXPECT_EQ(b_tx.try_send(std::string("b")), corio::channel_status::ok);
  run_on_loop([&]() -> corio::task<void> {
    auto r = co_await corio::select(a_rx.recv(), b_rx.recv());
    EXPECT_EQ(r.index(), 1u);
    EXPECT_TRUE(r.index() == 1 && std::get<1>(r) == "b");
  });
  EXPECT_EQ(a_rx.size(), 0u);
}

// Go's nil-channel idiom: a loop over two channels drops the branch of the one it found closed,
// instead of spinning on its nullopt, and ends when both are closed.
TEST(select, a_disabled_branch_is_never_polled_so_a_loop_can_drop_a_closed_channel) {
  auto [a_tx, a_rx] = corio::channel<int>(4);
  auto [b_tx, b_rx] = corio::channel<int>(4);
  run_on_loop([&]() -> corio::task<void> {
    EXPECT_EQ(a_tx.try_send(1), corio::channel_status::ok);
    a_tx.close();
    EXPECT_EQ(b_tx.try_send(10), corio::channel_status::ok);
    EXPECT_EQ(b_tx.try_send(20), corio::channel_status::ok);
    b_tx.close();
    bool a_open = true;
    bool b_open = true;
    int sum = 0;
    int rounds = 0;
    while (a_open || b_open) {
      ++rounds;
      auto r = co_await corio::select(corio::only_if(a_open, a_rx.recv()), corio::only_if(b_open, b_rx.recv()));
      auto& got = r.index() == 0 ? std::get<0>(r) : std::get<1>(r);
      if (!got) {
        (r.index() == 0 ? a_open : b_open) = false;
      } else {
        sum += *got;
      }
    }
    EXPECT_EQ(sum, 31);
    EXPECT_EQ(rounds, 5);  // three values and two closes: no round won by a dropped branch
  });
}

TEST(select, with_every_channel_branch_disabled_only_the_timeout_or_default_can_win) {
  auto [tx, rx] = corio::channel<int>(1);
  EXPECT_EQ(tx.try_send(7), corio::channel_status::ok);
  run_on_loop([&]() -> corio::task<void> {
    auto r = co_await corio::select(corio::only_if(false, rx.recv()), corio::after(10ms));
    EXPECT_EQ(r.index(), 1u);
    auto d = co_await corio::select(corio::only_if(false, rx.recv()), corio::otherwise());
    EXPECT_EQ(d.index(), 1u);
    auto e = co_await corio::select(corio::only_if(true, rx.recv()), corio::otherwise());
    EXPECT_TRUE(e.index() == 0 && std::get<0>(e) == 7);
    try {
      co_await corio::with_timeout(10ms, corio::select(corio::only_if(false, rx.recv())));
      ADD_FAILURE() << "a select of disabled branches completed";
    } catch (const corio::timed_out&) {
    }
  });
}

TEST(select, an_after_branch_of_the_largest_duration_never_wins) {
  auto [tx, rx] = corio::channel<int>(1);
  run_on_loop([&]() -> corio::task<void> {
    auto sender = [](corio::sender<int> to) -> corio::task<void> {
      co_await corio::sleep_for(20ms);
      int value = 5;
      (void)co_await to.send(std::move(value));
    };
    auto sending = corio::spawn(sender(tx));
    auto r = co_await corio::select(rx.recv(), corio::after(std::chrono::nanoseconds::max()));
    EXPECT_TRUE(r.index() == 0 && std::get<0>(r) == 5) << "branch " << r.index();
    co_await std::move(sending);
  });
}

TEST(select, picks_among_ready_branches_at_random) {
  auto [a_tx, a_rx] = corio::channel<int>(1);
  auto [b_tx, b_rx] = corio::channel<int>(1);
  constexpr int rounds = 2000;
  int wins[2] = {0, 0};
  run_on_loop([&]() -> corio::task<void> {
    for (int i = 0; i < rounds; ++i) {
      (void)a_tx.try_send(1);  // both ready every round (the loser keeps its value)
      (void)b_tx.try_send(2);
      auto r = co_await corio::select(a_rx.recv(), b_rx.recv());
      ++wins[r.index()];
    }
  });
  EXPECT_EQ(wins[0] + wins[1], rounds);
  EXPECT_GT(wins[0], rounds * 4 / 10);
  EXPECT_GT(wins[1], rounds * 4 / 10);
}

TEST(select, biased_always_picks_the_first_ready_branch) {
  auto [a_tx, a_rx] = corio::channel<int>(1);
  auto [b_tx, b_rx] = corio::channel<int>(1);
  run_on_loop([&]() -> corio::task<void> {
    for (int i = 0; i < 100; ++i) {
      (void)a_tx.try_send(1);
      (void)b_tx.try_send(2);
      auto r = co_await corio::select_biased(a_rx.recv(), b_rx.recv());
      EXPECT_EQ(r.index(), 0u);
    }
  });
  EXPECT_EQ(b_rx.size(), 1u);
}

TEST(select, default_branch_wins_when_nothing_is_ready_and_consumes_nothing) {
  auto [a_tx, a_rx] = corio::channel<int>(0);
  auto [b_tx, b_rx] = corio::channel<int>(0);
  run_on_loop([&]() -> corio::task<void> {
    int value = 5;
    auto r = co_await corio::select(a_rx.recv(), b_tx.send(std::move(value)), corio::otherwise());
    EXPECT_EQ(r.index(), 2u);
    EXPECT_TRUE(std::holds_alternative<corio::select_default>(r));
    EXPECT_EQ(value, 5);
  });
  EXPECT_EQ(a_tx.try_send(1), corio::channel_status::full);  // nobody is left parked on either
  EXPECT_EQ(b_rx.try_recv().status, corio::channel_status::empty);
}

TEST(select, timeout_branch_wins_when_nothing_arrives_in_time) {
  auto [tx, rx] = corio::channel<int>(1);
  run_on_loop([&]() -> corio::task<void> {
    auto start = std::chrono::steady_clock::now();
    auto r = co_await corio::select(rx.recv(), corio::after(20ms));
    EXPECT_EQ(r.index(), 1u);
    EXPECT_GE(std::chrono::steady_clock::now() - start, 20ms);
  });
  EXPECT_EQ(tx.try_send(1), corio::channel_status::ok);
  EXPECT_EQ(rx.size(), 1u);  // the timed-out select left no receiver behind
}

TEST(select, a_value_arriving_before_the_timeout_wins_and_the_timer_is_disarmed) {
  auto [tx, rx] = corio::channel<int>(0);
  corio::event_loop loop;
  std::optional<int> got;
  loop.spawn([](corio::receiver<int> rx, std::optional<int>& got) -> corio::task<void> {
    auto r = co_await corio::select(rx.recv(), corio::after(10s));
    EXPECT_EQ(r.index(), 0u);
    got = std::get<0>(r);
  }(rx, got));
  loop.run_until_idle();
  EXPECT_EQ(tx.try_send(3), corio::channel_status::ok);
  loop.run_until_idle();
  EXPECT_EQ(got, 3);
}

TEST(select, a_plain_receiver_parked_behind_a_decided_select_gets_the_value) {
  auto [a_tx, a_rx] = corio::channel<int>(1);
  auto [b_tx, b_rx] = corio::channel<int>(1);
  corio::event_loop loop;
  std::size_t winner = 99;
  std::optional<int> selected;
  std::optional<int> plain;
  loop.spawn([](corio::receiver<int> a, corio::receiver<int> b, std::size_t& winner,
                std::optional<int>& selected) -> corio::task<void> {
    auto r = co_await corio::select(a.recv(), b.recv());
    winner = r.index();
    selected = r.index() == 0 ? std::get<0>(r) : std::get<1>(r);
  }(a_rx, b_rx, winner, selected));
  loop.spawn([](corio::receiver<int> a, std::optional<int>& plain) -> corio::task<void> {
    plain = co_await a.recv();
  }(a_rx, plain));
  loop.run_until_idle();  // a's list: the select's node, then the plain receiver's
  EXPECT_EQ(b_tx.try_send(7), corio::channel_status::ok);  // decides the select; its node on a stays linked
  EXPECT_EQ(a_tx.try_send(5), corio::channel_status::ok);  // skips that node, hands 5 to the plain receiver
  loop.run_until_idle();
  EXPECT_EQ(winner, 1u);
  EXPECT_EQ(selected, 7);
  EXPECT_EQ(plain, 5);
  EXPECT_EQ(a_rx.size(), 0u);
}

TEST(select, parked_select_takes_from_whichever_channel_gets_a_value_and_leaves_the_other_alone) {
  auto [a_tx, a_rx] = corio::channel<int>(1);
  auto [b_tx, b_rx] = corio::channel<int>(1);
  corio::event_loop loop;
  std::size_t winner = 99;
  loop.spawn([](corio::receiver<int> a, corio::receiver<int> b, std::size_t& winner) -> corio::task<void> {
    auto r = co_await corio::select(a.recv(), b.recv());
    winner = r.index();
    EXPECT_EQ(std::get<1>(r), 8);
  }(a_rx, b_rx, winner));
  loop.run_until_idle();
  EXPECT_EQ(b_tx.try_send(8), corio::channel_status::ok);  // straight into the select's frame
  EXPECT_EQ(a_tx.try_send(1), corio::channel_status::ok);  // the select's node there was skipped
  loop.run_until_idle();
  EXPECT_EQ(winner, 1u);
  EXPECT_EQ(a_rx.size(), 1u);
  EXPECT_EQ(b_rx.size(), 0u);
}

TEST(select, a_send_branch_delivers_to_a_waiting_receiver_and_the_losing_send_keeps_its_value) {
  auto [a_tx, a_rx] = corio::channel<std::string>(0);
  auto [b_tx, b_rx] = corio::channel<std::string>(0);
  corio::event_loop loop;
  std::optional<std::string> got;
  loop.spawn([](corio::receiver<std::string> rx, std::optional<std::string>& got) -> corio::task<void> {
    got = co_await rx.recv();
  }(b_rx, got));
  loop.run_until_idle();
  std::string for_a = "to a";
  std::string for_b = "to b";
  loop.spawn([](corio::sender<std::string> a, corio::sender<std::string> b, std::string& for_a,
                std::string& for_b) -> corio::task<void> {
    auto r = co_await corio::select(a.send(std::move(for_a)), b.send(std::move(for_b)));
    EXPECT_EQ(r.index(), 1u);
    EXPECT_TRUE(std::get<1>(r));
  }(a_tx, b_tx, for_a, for_b));
  loop.run_until_idle();
  EXPECT_EQ(got, "to b");
  EXPECT_EQ(for_a, "to a");  // the losing send never touched it
}

TEST(select, a_closed_channel_is_ready_with_nullopt) {
  auto [a_tx, a_rx] = corio::channel<int>(0);
  auto [b_tx, b_rx] = corio::channel<int>(0);
  b_tx.close();
  run_on_loop([&]() -> corio::task<void> {
    auto r = co_await corio::select(a_rx.recv(), b_rx.recv());
    EXPECT_EQ(r.index(), 1u);
    EXPECT_TRUE(r.index() == 1 && std::get<1>(r) == std::nullopt);
  });
}

TEST(select, close_wakes_a_parked_select) {
  auto [a_tx, a_rx] = corio::channel<int>(0);
  auto [b_tx, b_rx] = corio::channel<int>(0);
  corio::event_loop loop;
  std::size_t winner = 99;
  loop.spawn([](corio::receiver<int> a, corio::sender<int> b, std::size_t& winner) -> corio::task<void> {
    auto r = co_await corio::select(a.recv(), b.send(1));
    winner = r.index();
    EXPECT_FALSE(std::get<1>(r));  // closed: not delivered
  }(a_rx, b_tx, winner));
  loop.run_until_idle();
  b_rx.close();
  loop.run_until_idle();
  EXPECT_EQ(winner, 1u);
}

TEST(select, cancelled_while_parked_throws_and_leaves_no_node_behind) {
  auto [a_tx, a_rx] = corio::channel<int>(0);
  auto [b_tx, b_rx] = corio::channel<int>(0);
  corio::event_loop loop;
  std::stop_source stop;
  std::stop_token token = stop.get_token();
  bool threw = false;
  int kept = 0;
  loop.spawn(cancellable_by(token, [](corio::receiver<int> a, corio::sender<int> b, bool& threw, int& kept) -> corio::task<void> {
    int value = 4;
    try {
      (void)co_await corio::select(a.recv(), b.send(std::move(value)), corio::after(10s));
    } catch (const corio::cancelled&) {
      threw = true;
      kept = value;
    }
  }(a_rx, b_tx, threw, kept)));
  loop.run_until_idle();
  stop.request_stop();
  loop.run_until_idle();
  EXPECT_TRUE(threw);
  EXPECT_EQ(kept, 4);
  EXPECT_EQ(a_tx.try_send(1), corio::channel_status::full);  // no receiver parked any more
  EXPECT_EQ(b_rx.try_recv().status, corio::channel_status::empty);  // no sender either
}

TEST(select, a_value_won_by_a_cancelled_select_goes_back_to_its_channel) {
  auto [tx, rx] = corio::channel<int>(0);
  auto [other_tx, other_rx] = corio::channel<int>(0);
  corio::event_loop loop;
  std::stop_source stop;
  std::stop_token token = stop.get_token();
  loop.spawn(cancellable_by(token, [](corio::receiver<int> rx, corio::receiver<int> other) -> corio::task<void> {
    EXPECT_THROW((void)co_await corio::select(rx.recv(), other.recv()), corio::cancelled);
  }(rx, other_rx)));
  loop.run_until_idle();
  EXPECT_EQ(tx.try_send(6), corio::channel_status::ok);  // handed to the parked select
  stop.request_stop();                                    // before it resumes
  loop.run_until_idle();
  EXPECT_EQ(rx.try_recv().value, 6);
}

TEST(select, branches_on_the_same_channel_lock_it_once_and_never_match_each_other) {
  auto [tx, rx] = corio::channel<int>(0);
  corio::event_loop loop;
  std::size_t winner = 99;
  loop.spawn([](corio::sender<int> tx, corio::receiver<int> rx, std::size_t& winner) -> corio::task<void> {
    auto r = co_await corio::select(rx.recv(), tx.send(1), rx.recv());
    winner = r.index();
  }(tx, rx, winner));
  loop.run_until_idle();
  EXPECT_EQ(winner, 99u);  // its own send did not satisfy its own recv
  EXPECT_EQ(rx.try_recv().value, 1);  // takes the parked send branch
  loop.run_until_idle();
  EXPECT_EQ(winner, 1u);
}

TEST(select, only_a_timeout_is_a_sleep) {
  run_on_loop([&]() -> corio::task<void> {
    auto r = co_await corio::select(corio::after(1ms));
    EXPECT_EQ(r.index(), 0u);
  });
}

TEST(select, a_timeout_branch_on_a_plain_thread_throws_a_logic_error) {
  auto [tx, rx] = corio::channel<int>(0);
  EXPECT_THROW((void)corio::sync_wait(corio::select(rx.recv(), corio::after(1ms))), std::logic_error);
}

TEST(select, a_loop_destroyed_under_a_parked_select_keeps_the_value_it_had_won) {
  corio::test::lifetime_counts counts;
  auto [tx, rx] = corio::channel<corio::test::counted>(0);
  auto [other_tx, other_rx] = corio::channel<corio::test::counted>(0);
  {
    corio::event_loop loop;
    loop.spawn([](auto rx, auto other) -> corio::task<void> {
      (void)co_await corio::select(rx.recv(), other.recv(), corio::after(10s));
    }(rx, other_rx));
    loop.run_until_idle();
    EXPECT_EQ(tx.try_send(corio::test::counted(counts, 3)), corio::channel_status::ok);
  }  // the frame that had won the value is destroyed before it resumed
  auto back = rx.try_recv();
  ASSERT_TRUE(back);
  EXPECT_EQ(back.value->value(), 3);
  back.value.reset();
  EXPECT_EQ(counts.alive, 0);
}

// A select kept in a variable borrowed its channels: awaited after their last handles went, it read
// the freed channels (a review; ASan: heap-use-after-free). It holds them now: the receive branch
// finds its channel closed, and the send branch's value stays with the select.
TEST(select, a_select_awaited_after_its_channels_handles_went_sees_them_closed) {
  auto [tx, rx] = corio::channel<int>(1);
  auto [other_tx, other_rx] = corio::channel<std::string>(1);
  auto waiting = corio::select(rx.recv(), other_tx.send(std::string("kept")), corio::otherwise());
  tx = {};
  rx = {};
  other_tx = {};
  other_rx = {};
  auto result = corio::sync_wait(std::move(waiting));
  ASSERT_LE(result.index(), 1u) << "a closed channel is a ready branch";
  if (result.index() == 0) {
    EXPECT_FALSE(std::get<0>(result).has_value());
  } else {
    EXPECT_FALSE(std::get<1>(result)) << "a send to a closed channel delivers nothing";
  }
}

}  // namespace
