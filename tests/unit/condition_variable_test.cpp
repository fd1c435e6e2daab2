#include <corio/async_mutex.hpp>
#include <corio/condition_variable.hpp>
#include <corio/event.hpp>
#include <corio/event_loop.hpp>
#include <corio/sync_wait.hpp>
#include <corio/task.hpp>
#include <corio/wait_group.hpp>
#include <corio/when_any.hpp>

#include <gtest/gtest.h>

#include <deque>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "support/loops.hpp"

namespace {

using corio::test::loop_thread;
using corio::test::run_on_loop;

TEST(condition_variable, wait_releases_the_mutex_and_reacquires_it_before_returning) {
  corio::async_mutex mutex;
  corio::condition_variable cv;
  corio::event_loop loop;
  bool ready = false;
  bool waiter_owned_after = false;
  bool mutex_free_while_waiting = false;
  auto waiter = [&]() -> corio::task<void> {
    auto guard = co_await mutex.lock();
    co_await cv.wait(guard, [&] { return ready; });
    waiter_owned_after = guard.owns_lock() && !mutex.try_lock();
  };
  auto notifier = [&]() -> corio::task<void> {
    {
      auto guard = co_await mutex.lock();  // only possible because the waiter released it
      mutex_free_while_waiting = true;
      ready = true;
    }
    cv.notify_one();
  };
  loop.spawn(waiter());
  loop.run_until_idle();
  loop.spawn(notifier());
  loop.run_until_idle();
  EXPECT_TRUE(mutex_free_while_waiting);
  EXPECT_TRUE(waiter_owned_after);
  EXPECT_TRUE(mutex.try_lock());  // and the waiter's guard released it at the end
  mutex.unlock();
}

TEST(condition_variable, notify_while_holding_the_mutex_resumes_the_waiter_only_after_unlock) {
  corio::async_mutex mutex;
  corio::condition_variable cv;
  corio::event_loop loop;
  std::vector<const char*> steps;
  auto waiter = [&]() -> corio::task<void> {
    auto guard = co_await mutex.lock();
    co_await cv.wait(guard);
    steps.push_back("waiter resumed");
  };
  auto notifier = [&]() -> corio::task<void> {
    auto guard = co_await mutex.lock();
    cv.notify_one();
    co_await corio::yield();  // the notified waiter runs, but must queue for the mutex
    steps.push_back("notifier unlocks");
  };
  loop.spawn(waiter());
  loop.run_until_idle();
  loop.spawn(notifier());
  loop.run_until_idle();
  EXPECT_EQ(steps, (std::vector<const char*>{"notifier unlocks", "waiter resumed"}));
}

TEST(condition_variable, notify_one_wakes_one_waiter_and_notify_all_the_rest_in_order) {
  corio::async_mutex mutex;
  corio::condition_variable cv;
  corio::event_loop loop;
  std::vector<int> woken;
  auto waiter = [&](int id) -> corio::task<void> {
    auto guard = co_await mutex.lock();
    co_await cv.wait(guard);
    woken.push_back(id);
  };
  for (int id = 0; id < 4; ++id) {
    loop.spawn(waiter(id));
  }
  loop.run_until_idle();
  cv.notify_one();
  loop.run_until_idle();
  EXPECT_EQ(woken, (std::vector<int>{0}));
  cv.notify_all();
  loop.run_until_idle();
  EXPECT_EQ(woken, (std::vector<int>{0, 1, 2, 3}));
  cv.notify_all();  // nobody waits: nothing happens
  loop.run_until_idle();
  EXPECT_EQ(woken.size(), 4u);
}

TEST(condition_variable, producer_and_consumer_on_different_threads_pass_every_item) {
  constexpr int items = 500;
  corio::async_mutex mutex;
  corio::condition_variable not_empty;
  corio::event done;
  std::deque<int> queue;
  std::vector<int> received;
  auto consumer = [&]() -> corio::task<void> {
    for (int i = 0; i < items; ++i) {
      auto guard = co_await mutex.lock();
      co_await not_empty.wait(guard, [&] { return !queue.empty(); });
      received.push_back(queue.front());
      queue.pop_front();
    }
    done.set();
  };
  auto producer = [&]() -> corio::task<void> {
    for (int i = 0; i < items; ++i) {
      {
        auto guard = co_await mutex.lock();
        queue.push_back(i);
      }
      not_empty.notify_one();
      if (i % 7 == 0) {
        co_await corio::yield();
      }
    }
  };
  {
    loop_thread a;
    loop_thread b;
    a.spawn(consumer());
    b.spawn(producer());
    corio::sync_wait(done.wait());
  }
  ASSERT_EQ(received.size(), std::size_t{items});
  for (int i = 0; i < items; ++i) {
    EXPECT_EQ(received[static_cast<std::size_t>(i)], i);
  }
}

TEST(condition_variable, cancelled_waiter_throws_cancelled_holding_the_lock_again) {
  corio::async_mutex mutex;
  corio::condition_variable cv;
  bool threw = false;
  bool owned_when_cancelled = false;
  run_on_loop([&]() -> corio::task<void> {
    auto waiter = [&]() -> corio::task<void> {
      auto guard = co_await mutex.lock();
      try {
        co_await cv.wait(guard);
      } catch (const corio::cancelled&) {
        threw = true;
        owned_when_cancelled = guard.owns_lock() && !mutex.try_lock();
        throw;
      }
    };
    auto first = co_await corio::when_any(waiter(), corio::yield());
    EXPECT_EQ(first.index(), 1u);
  });
  EXPECT_TRUE(threw);
  EXPECT_TRUE(owned_when_cancelled);
  EXPECT_TRUE(mutex.try_lock());  // the cancelled waiter's guard unlocked on the way out
  mutex.unlock();
  cv.notify_all();  // would resume a freed frame if the waiter were left linked (ASan)
}

TEST(condition_variable, cancelled_waiter_waits_for_the_mutex_before_throwing) {
  corio::async_mutex mutex;
  corio::condition_variable cv;
  corio::event cancel_w;
  corio::event_loop loop;
  std::vector<const char*> steps;
  auto waiter = [&]() -> corio::task<void> {
    auto guard = co_await mutex.lock();
    try {
      co_await cv.wait(guard);
    } catch (const corio::cancelled&) {
      steps.push_back("waiter cancelled");
    }
  };
  auto cancellable = [&]() -> corio::task<void> { co_await corio::when_any(waiter(), cancel_w.wait()); };
  auto holder = [&]() -> corio::task<void> {
    auto guard = co_await mutex.lock();
    cancel_w.set();
    co_await corio::yield();
    co_await corio::yield();
    steps.push_back("holder unlocks");
  };
  loop.spawn(cancellable());
  loop.run_until_idle();
  loop.spawn(holder());
  loop.run_until_idle();
  EXPECT_EQ(steps, (std::vector<const char*>{"holder unlocks", "waiter cancelled"}));
}

TEST(condition_variable, notification_to_a_waiter_cancelled_before_it_resumes_is_passed_on) {
  corio::async_mutex mutex;
  corio::condition_variable cv;
  corio::event cancel_w;
  corio::event_loop loop;
  bool c_woken = false;
  auto waiter_w = [&]() -> corio::task<void> {
    auto guard = co_await mutex.lock();
    co_await cv.wait(guard);
  };
  auto cancellable = [&]() -> corio::task<void> { co_await corio::when_any(waiter_w(), cancel_w.wait()); };
  auto waiter_c = [&]() -> corio::task<void> {
    auto guard = co_await mutex.lock();
    co_await cv.wait(guard);
    c_woken = true;
  };
  loop.spawn(cancellable());
  loop.spawn(waiter_c());
  loop.run_until_idle();
  cancel_w.set();    // queued first: the cancellation runs before the notified waiter resumes
  cv.notify_one();   // addressed to W
  loop.run_until_idle();
  EXPECT_TRUE(c_woken);
}

TEST(condition_variable, wait_with_a_guard_that_holds_no_lock_throws_logic_error) {
  corio::async_mutex mutex;
  corio::condition_variable cv;
  bool threw_empty = false;
  bool threw_unlocked = false;
  run_on_loop([&]() -> corio::task<void> {
    corio::async_lock_guard empty;
    try {
      co_await cv.wait(empty);
    } catch (const std::logic_error&) {
      threw_empty = true;
    }
    auto guard = co_await mutex.lock();
    mutex.unlock();  // misuse: unlocked behind the guard's back
    try {
      co_await cv.wait(guard);
    } catch (const std::logic_error&) {
      threw_unlocked = true;
    }
    guard.release();  // it owns nothing real; do not unlock again
  });
  EXPECT_TRUE(threw_empty);
  EXPECT_TRUE(threw_unlocked);
}

TEST(condition_variable, destroying_a_loop_with_waiters_leaves_the_mutex_free) {
  corio::async_mutex mutex;
  corio::condition_variable cv;
  corio::event never;
  auto waiter = [&]() -> corio::task<void> {
    auto guard = co_await mutex.lock();
    co_await cv.wait(guard);
  };
  auto holder = [&]() -> corio::task<void> {
    auto guard = co_await mutex.lock();
    for (int i = 0; i < 5; ++i) {
      cv.notify_one();  // the notified waiters queue for the mutex this task keeps
    }
    co_await never.wait();
  };
  {
    corio::event_loop loop;
    for (int i = 0; i < 6; ++i) {
      loop.spawn(waiter());
    }
    loop.run_until_idle();
    loop.spawn(holder());  // leaves one waiter parked on the condition variable
    loop.run_until_idle();
  }
  EXPECT_TRUE(mutex.try_lock());
  mutex.unlock();
  cv.notify_all();
}

}  // namespace
