#include <corio/cancellation.hpp>
#include <corio/runtime.hpp>
#include <corio/scope.hpp>
#include <corio/task.hpp>
#include <corio/time.hpp>
#include <corio/yield.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <thread>

#include "support/lifetime.hpp"

using namespace std::chrono_literals;

namespace {

corio::runtime::options two_workers() { return {.workers = 2, .max_blocking_threads = 4}; }

TEST(task_scope, join_waits_for_every_child) {
  corio::runtime rt(two_workers());
  std::atomic<int> finished{0};
  auto parent = [&]() -> corio::task<int> {
    corio::task_scope scope;
    auto child = [&](int yields) -> corio::task<void> {
      for (int i = 0; i < yields; ++i) {
        co_await corio::yield();
      }
      finished.fetch_add(1);
    };
    for (int i = 0; i < 100; ++i) {
      scope.spawn(child(i % 10));
    }
    co_await scope.join();
    co_return finished.load();
  };
  EXPECT_EQ(rt.block_on(parent()), 100);
}

// Sleeps for `delay`, then counts itself finished, or counts itself cancelled. Borrows nothing from
// its parent's frame: an abandoned scope's child outlives the join.
corio::task<void> counted_sleep(std::chrono::milliseconds delay, std::atomic<int>* finished,
                                std::atomic<int>* cancelled) {
  try {
    co_await corio::sleep_for(delay);
  } catch (const corio::cancelled&) {
    cancelled->fetch_add(1);
    throw;
  }
  finished->fetch_add(1);
}

// A scope moves while nobody else uses it: the moved-to scope joins the children, the moved-from
// one has none (join returns at once) and refuses spawn; assigning over a scope cancels its children.
TEST(task_scope, a_moved_scope_joins_its_children_and_the_moved_from_one_has_none) {
  std::atomic<int> finished{0};
  std::atomic<int> cancelled{0};
  corio::runtime rt(two_workers());
  rt.block_on([&]() -> corio::task<void> {
    corio::task_scope first;
    first.spawn(counted_sleep(1ms, &finished, &cancelled));
    first.spawn(counted_sleep(2ms, &finished, &cancelled));
    corio::task_scope second(std::move(first));
    co_await first.join();
    EXPECT_THROW(first.spawn(counted_sleep(1ms, &finished, &cancelled)), corio::invalid_task);
    co_await second.join();
    EXPECT_EQ(finished.load(), 2);
    corio::task_scope long_running;
    long_running.spawn(counted_sleep(10s, &finished, &cancelled));
    long_running = std::move(second);  // the 10 s child is cancelled
    co_await long_running.join();
    for (int i = 0; i < 1000 && cancelled.load() == 0; ++i) {
      co_await corio::sleep_for(1ms);
    }
  }());
  EXPECT_EQ(finished.load(), 2);
  EXPECT_EQ(cancelled.load(), 1);
}

TEST(task_scope, first_failure_cancels_siblings_and_is_rethrown_from_join) {
  corio::runtime rt(two_workers());
  std::atomic<int> cancelled{0};
  auto parent = [&]() -> corio::task<void> {
    corio::task_scope scope;
    auto sleeper = [&]() -> corio::task<void> {
      try {
        co_await corio::sleep_for(1h);
      } catch (const corio::cancelled&) {
        cancelled.fetch_add(1);
        throw;
      }
    };
    auto failing = []() -> corio::task<void> {
      co_await corio::sleep_for(5ms);
      throw std::runtime_error("child failed");
    };
    for (int i = 0; i < 10; ++i) {
      scope.spawn(sleeper());
    }
    scope.spawn(failing());
    co_await scope.join();
  };
  auto start = corio::clock::now();
  EXPECT_THROW(rt.block_on(parent()), std::runtime_error);
  EXPECT_EQ(cancelled.load(), 10);
  EXPECT_LT(corio::clock::now() - start, 10s);
}

TEST(task_scope, cancelling_the_joiner_cancels_children_and_waits_for_them) {
  corio::runtime rt(two_workers());
  std::atomic<int> children_stopped{0};
  auto parent = [&]() -> corio::task<bool> {
    auto joiner = [&]() -> corio::task<void> {
      corio::task_scope scope;
      auto child = [&]() -> corio::task<void> {
        struct count_stop {
          std::atomic<int>& counter;
          ~count_stop() { counter.fetch_add(1); }
        } stop{children_stopped};
        co_await corio::sleep_for(1h);
      };
      for (int i = 0; i < 5; ++i) {
        scope.spawn(child());
      }
      co_await scope.join();
    };
    auto handle = corio::spawn(joiner());
    co_await corio::sleep_for(5ms);
    handle.cancel();
    try {
      co_await handle;
    } catch (const corio::cancelled&) {
      co_return children_stopped.load() == 5;  // every child stopped before join returned
    }
    co_return false;
  };
  EXPECT_TRUE(rt.block_on(parent()));
}

TEST(task_scope, join_after_cancel_returns_normally_once_every_child_stopped) {
  corio::runtime rt(two_workers());
  std::atomic<int> saw_cancelled{0};
  auto parent = [&]() -> corio::task<int> {
    corio::task_scope scope;
    auto child = [&]() -> corio::task<void> {
      try {
        co_await corio::sleep_for(1h);
      } catch (const corio::cancelled&) {
        saw_cancelled.fetch_add(1);
        throw;
      }
    };
    for (int i = 0; i < 4; ++i) {
      scope.spawn(child());
    }
    co_await corio::sleep_for(5ms);
    scope.cancel();
    co_await scope.join();  // a child's cancellation is not a failure
    co_return saw_cancelled.load();
  };
  EXPECT_EQ(rt.block_on(parent()), 4);
}

TEST(task_scope, join_after_cancel_still_rethrows_a_child_failure) {
  corio::runtime rt(two_workers());
  auto parent = [&]() -> corio::task<void> {
    corio::task_scope scope;
    scope.spawn([]() -> corio::task<void> {
      co_await corio::yield();
      throw std::runtime_error("child failed");
    });
    scope.spawn([]() -> corio::task<void> { co_await corio::sleep_for(1h); });
    co_await corio::sleep_for(5ms);
    scope.cancel();
    co_await scope.join();
  };
  EXPECT_THROW(rt.block_on(parent()), std::runtime_error);
}

TEST(task_scope, destroying_an_unjoined_scope_cancels_its_children) {
  corio::runtime rt(two_workers());
  std::atomic<int> cancelled{0};
  auto parent = [&]() -> corio::task<void> {
    auto child = [&]() -> corio::task<void> {
      try {
        co_await corio::sleep_for(1h);
      } catch (const corio::cancelled&) {
        cancelled.fetch_add(1);
      }
    };
    {
      corio::task_scope scope;
      scope.spawn(child());
      scope.spawn(child());
      co_await corio::sleep_for(2ms);
    }
    while (cancelled.load() != 2) {
      co_await corio::sleep_for(1ms);
    }
  };
  rt.block_on(parent());
  EXPECT_EQ(cancelled.load(), 2);
}

TEST(task_scope, spawn_outside_an_executor_throws_logic_error) {
  corio::task_scope scope;
  auto child = []() -> corio::task<void> { co_return; };
  EXPECT_THROW(scope.spawn(child()), std::logic_error);
}

TEST(task_scope, join_with_no_children_completes_at_once) {
  corio::runtime rt(two_workers());
  auto parent = []() -> corio::task<void> {
    corio::task_scope scope;
    co_await scope.join();
  };
  EXPECT_NO_THROW(rt.block_on(parent()));
}

}  // namespace

namespace {

TEST(task_scope, a_failure_in_a_scope_destroyed_without_join_reaches_the_runtime_hook) {
  std::atomic<int> reported{0};
  corio::runtime rt(corio::runtime::options{
      .workers = 2, .max_blocking_threads = 4, .on_unhandled_exception = [&](std::exception_ptr) { ++reported; }});
  rt.block_on([]() -> corio::task<void> {
    corio::task_scope scope;
    scope.spawn([]() -> corio::task<void> {
      co_await corio::yield();
      throw std::runtime_error("nobody joins me");
    });
    co_await corio::sleep_for(20ms);  // the child fails while the scope is alive; no join follows
  }());
  rt.block_on([]() -> corio::task<void> {
    corio::task_scope scope;
    scope.spawn([]() -> corio::task<void> {
      co_await corio::shield(corio::sleep_for(20ms));  // the scope's end cancels, the shield ignores it
      throw std::runtime_error("fails after the scope is gone");
    });
    co_return;
  }());
  for (int i = 0; i < 500 && reported.load() < 2; ++i) {
    std::this_thread::sleep_for(2ms);
  }
  EXPECT_EQ(reported.load(), 2);
}

TEST(task_scope, spawn_keeps_a_capturing_lambda_alive_until_its_task_ends) {
  corio::runtime rt(two_workers());
  int total = rt.block_on([]() -> corio::task<int> {
    corio::task_scope scope;
    std::atomic<int> sum{0};
    for (int i = 1; i <= 4; ++i) {
      auto big = std::make_shared<int>(i);
      scope.spawn([big, &sum]() -> corio::task<void> {  // the closure is a temporary here
        co_await corio::sleep_for(5ms);
        sum.fetch_add(*big);
      });
    }
    co_await scope.join();
    co_return sum.load();
  }());
  EXPECT_EQ(total, 10);
}

// Cancellation sticks: a child spawned after a failure or cancel() starts cancelled. Before the fix it
// ran its whole sleep (join() waited 1 h here), so a cancelled join() could wait on a child spawned by
// a sibling after the cancellation reached the children already there.
TEST(task_scope, a_child_spawned_after_the_scope_was_cancelled_or_failed_starts_cancelled) {
  corio::runtime rt(two_workers());
  std::atomic<int> saw_cancelled{0};
  auto sleeper = [&]() -> corio::task<void> {
    try {
      co_await corio::sleep_for(1h);
    } catch (const corio::cancelled&) {
      saw_cancelled.fetch_add(1);
      throw;
    }
  };
  rt.block_on([&]() -> corio::task<void> {
    corio::task_scope cancelled_scope;
    cancelled_scope.cancel();
    cancelled_scope.spawn(sleeper());
    co_await cancelled_scope.join();

    corio::task_scope failed_scope;
    failed_scope.spawn([]() -> corio::task<void> {
      co_await corio::yield();
      throw std::runtime_error("first");
    }());
    co_await corio::sleep_for(5ms);  // the failure is recorded
    failed_scope.spawn(sleeper());
    EXPECT_THROW(co_await failed_scope.join(), std::runtime_error);
  }());
  EXPECT_EQ(saw_cancelled.load(), 2);
}

// Found by a review: the three tests below failed (a double report, a skipped or use-after-free join,
// a hang).
TEST(task_scope, a_failure_a_join_rethrew_is_not_reported_when_the_scope_went_during_the_join) {
  std::atomic<int> reported{0};
  corio::runtime rt(corio::runtime::options{
      .workers = 2, .max_blocking_threads = 4, .on_unhandled_exception = [&](std::exception_ptr) { ++reported; }});
  bool rethrown = rt.block_on([]() -> corio::task<bool> {
    auto* scope = new corio::task_scope;
    scope->spawn([scope]() -> corio::task<void> {
      co_await corio::sleep_for(5ms);
      delete scope;  // gone while its join() still waits
    });
    scope->spawn([]() -> corio::task<void> {
      co_await corio::shield(corio::sleep_for(30ms));
      throw std::runtime_error("boom");
    });
    try {
      co_await scope->join();
    } catch (const std::runtime_error&) {
      co_return true;
    }
    co_return false;
  }());
  EXPECT_TRUE(rethrown);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(reported.load(), 0);
}

TEST(task_scope, a_join_made_before_the_scope_moves_still_waits_for_its_children) {
  corio::runtime rt(two_workers());
  std::atomic<bool> child_done{false};
  rt.block_on([&]() -> corio::task<void> {
    auto scope = std::make_unique<corio::task_scope>();
    scope->spawn([&child_done]() -> corio::task<void> {
      co_await corio::sleep_for(30ms);
      child_done = true;
    });
    corio::task<void> join = scope->join();
    corio::task_scope moved = std::move(*scope);
    scope.reset();
    co_await std::move(join);
    EXPECT_TRUE(child_done.load());
  }());
}

TEST(task_scope, join_from_one_of_its_own_children_throws_logic_error) {
  corio::runtime rt(two_workers());
  bool refused = rt.block_on([]() -> corio::task<bool> {
    corio::task_scope scope;
    auto result = std::make_shared<std::atomic<bool>>(false);
    scope.spawn([&scope, result]() -> corio::task<void> {
      co_await corio::sleep_for(5ms);  // its handle is adopted by then
      try {
        co_await scope.join();
      } catch (const std::logic_error&) {
        *result = true;
      }
    });
    co_await corio::with_timeout(5s, scope.join());
    co_return result->load();
  }());
  EXPECT_TRUE(refused);
}

}  // namespace
