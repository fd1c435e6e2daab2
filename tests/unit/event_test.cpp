#include <corio/event.hpp>
#include <corio/event_loop.hpp>
#include <corio/sync_wait.hpp>
#include <corio/task.hpp>
#include <corio/when_any.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "support/loops.hpp"

namespace {

using corio::test::loop_thread;
using corio::test::run_on_loop;

// ---- event (manual reset) ----

TEST(event, wait_on_a_set_event_completes_at_once) {
  corio::event ev(true);
  bool done = false;
  auto body = [&]() -> corio::task<void> {
    co_await ev.wait();
    done = true;
  };
  corio::sync_wait(body());  // would block forever if it suspended: nobody sets it
  EXPECT_TRUE(done);
  EXPECT_TRUE(ev.is_set());
}

TEST(event, set_wakes_every_waiter_and_stays_set) {
  corio::event ev;
  corio::event_loop loop;
  std::vector<int> woken;
  auto waiter = [&](int id) -> corio::task<void> {
    co_await ev.wait();
    woken.push_back(id);
  };
  for (int id = 0; id < 3; ++id) {
    loop.spawn(waiter(id));
  }
  loop.run_until_idle();
  EXPECT_TRUE(woken.empty());
  EXPECT_FALSE(ev.is_set());
  ev.set();
  EXPECT_TRUE(ev.is_set());
  loop.run_until_idle();
  EXPECT_EQ(woken, (std::vector<int>{0, 1, 2}));
  loop.spawn(waiter(3));
  loop.run_until_idle();
  EXPECT_EQ(woken.size(), 4u);
}

TEST(event, reset_makes_later_waits_suspend_again) {
  corio::event ev(true);
  corio::event_loop loop;
  bool woke = false;
  auto waiter = [&]() -> corio::task<void> {
    co_await ev.wait();
    woke = true;
  };
  ev.reset();
  EXPECT_FALSE(ev.is_set());
  loop.spawn(waiter());
  loop.run_until_idle();
  EXPECT_FALSE(woke);
  ev.set();
  loop.run_until_idle();
  EXPECT_TRUE(woke);
}

TEST(event, waiter_on_a_loop_resumes_on_its_thread_after_a_set_from_a_plain_thread) {
  corio::event ev;
  corio::event done;
  std::thread::id resumed_on;
  std::thread::id loop_id;
  auto waiter = [&]() -> corio::task<void> {
    co_await ev.wait();
    resumed_on = std::this_thread::get_id();
    done.set();
  };
  {
    loop_thread a;
    loop_id = a.thread.get_id();
    a.spawn(waiter());
    std::thread setter([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      ev.set();
    });
    corio::sync_wait(done.wait());
    setter.join();
  }
  EXPECT_EQ(resumed_on, loop_id);
}

TEST(event, cancelled_waiter_is_removed_and_the_event_unchanged) {
  corio::event ev;
  run_on_loop([&]() -> corio::task<void> {
    auto first = co_await corio::when_any(ev.wait(), corio::yield());
    EXPECT_EQ(first.index(), 1u);
    EXPECT_FALSE(ev.is_set());
    ev.set();  // with a stale waiter left behind, this would resume a finished frame (ASan)
    co_return;
  });
  EXPECT_TRUE(ev.is_set());
}

TEST(event, destroying_a_loop_with_waiters_unlinks_them) {
  corio::event ev;
  auto waiter = [&]() -> corio::task<void> { co_await ev.wait(); };
  {
    corio::event_loop loop;
    for (int i = 0; i < 10; ++i) {
      loop.spawn(waiter());
    }
    loop.run_until_idle();
  }
  ev.set();  // touches the list: ASan would flag a waiter left linked into a freed frame
  EXPECT_TRUE(ev.is_set());
}

// ---- auto_reset_event ----

TEST(auto_reset_event, set_without_waiters_signals_exactly_the_next_wait) {
  corio::auto_reset_event ev;
  corio::event_loop loop;
  int woken = 0;
  auto waiter = [&]() -> corio::task<void> {
    co_await ev.wait();
    ++woken;
  };
  ev.set();
  ev.set();  // signals do not accumulate
  loop.spawn(waiter());
  loop.spawn(waiter());
  loop.run_until_idle();
  EXPECT_EQ(woken, 1);
  EXPECT_FALSE(ev.try_wait());
}

TEST(auto_reset_event, set_releases_exactly_one_waiter_oldest_first) {
  corio::auto_reset_event ev;
  corio::event_loop loop;
  std::vector<int> woken;
  auto waiter = [&](int id) -> corio::task<void> {
    co_await ev.wait();
    woken.push_back(id);
  };
  for (int id = 0; id < 3; ++id) {
    loop.spawn(waiter(id));
  }
  loop.run_until_idle();
  ev.set();
  loop.run_until_idle();
  EXPECT_EQ(woken, (std::vector<int>{0}));
  ev.set();
  ev.set();
  loop.run_until_idle();
  EXPECT_EQ(woken, (std::vector<int>{0, 1, 2}));
  EXPECT_FALSE(ev.try_wait());  // every set() went to a waiter, none was stored
}

TEST(auto_reset_event, try_wait_consumes_the_signal) {
  corio::auto_reset_event ev(true);
  EXPECT_TRUE(ev.try_wait());
  EXPECT_FALSE(ev.try_wait());
}

TEST(auto_reset_event, ping_pong_between_two_loops_hands_off_every_round) {
  constexpr int rounds = 2000;
  corio::auto_reset_event ping;
  corio::auto_reset_event pong;
  corio::event done;
  int pings = 0;
  int pongs = 0;
  auto a = [&]() -> corio::task<void> {
    for (int i = 0; i < rounds; ++i) {
      ++pings;
      ping.set();
      co_await pong.wait();
    }
    done.set();
  };
  auto b = [&]() -> corio::task<void> {
    for (int i = 0; i < rounds; ++i) {
      co_await ping.wait();
      ++pongs;
      pong.set();
    }
  };
  {
    loop_thread first;
    loop_thread second;
    second.spawn(b());
    first.spawn(a());
    corio::sync_wait(done.wait());
  }
  EXPECT_EQ(pings, rounds);
  EXPECT_EQ(pongs, rounds);
  EXPECT_FALSE(ping.try_wait());
  EXPECT_FALSE(pong.try_wait());
}

TEST(auto_reset_event, cancelled_waiter_does_not_consume_the_next_signal) {
  corio::auto_reset_event ev;
  run_on_loop([&]() -> corio::task<void> {
    auto first = co_await corio::when_any(ev.wait(), corio::yield());
    EXPECT_EQ(first.index(), 1u);
    ev.set();
    EXPECT_TRUE(ev.try_wait());  // the signal was stored, not handed to the cancelled waiter
  });
}

TEST(auto_reset_event, signal_granted_to_a_waiter_cancelled_before_it_resumes_is_passed_on) {
  corio::auto_reset_event ev;
  corio::event cancel_w;
  corio::event_loop loop;
  std::size_t w_winner = 99;
  bool c_woken = false;
  auto cancellable = [&]() -> corio::task<void> {
    auto first = co_await corio::when_any(ev.wait(), cancel_w.wait());
    w_winner = first.index();
  };
  auto waiter = [&]() -> corio::task<void> {
    co_await ev.wait();
    c_woken = true;
  };
  loop.spawn(cancellable());
  loop.spawn(waiter());
  loop.run_until_idle();
  cancel_w.set();  // queued first: the cancellation runs before the granted waiter resumes
  ev.set();        // hands the signal to W's wait()
  loop.run_until_idle();
  EXPECT_EQ(w_winner, 1u);
  EXPECT_TRUE(c_woken);
  EXPECT_FALSE(ev.try_wait());
}

TEST(auto_reset_event, destroying_a_loop_after_a_grant_but_before_resumption_keeps_the_signal) {
  corio::auto_reset_event ev;
  auto waiter = [&]() -> corio::task<void> { co_await ev.wait(); };
  {
    corio::event_loop loop;
    loop.spawn(waiter());
    loop.spawn(waiter());
    loop.run_until_idle();
    ev.set();  // granted to the first waiter, which never gets to run
  }
  EXPECT_TRUE(ev.try_wait());  // passed on: to the second waiter (also gone), then stored
}

}  // namespace
