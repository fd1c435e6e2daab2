#include <corio/cancellation.hpp>
#include <corio/event.hpp>
#include <corio/runtime.hpp>
#include <corio/semaphore.hpp>
#include <corio/sync_wait.hpp>
#include <corio/task.hpp>
#include <corio/time.hpp>
#include <corio/when_any.hpp>
#include <corio/yield.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stop_token>
#include <thread>

using namespace std::chrono_literals;

namespace {

corio::runtime::options one_worker() { return {.workers = 1, .max_blocking_threads = 4}; }

TEST(cancellation, cancellation_requested_turns_true_after_cancel_without_throwing) {
  corio::runtime rt(one_worker());
  std::atomic<int> polls{0};
  auto h = rt.spawn([](std::atomic<int>* count) -> corio::task<int> {
    while (!co_await corio::cancellation_requested()) {
      count->fetch_add(1);
      std::this_thread::sleep_for(1ms);  // a computation between awaits
    }
    co_return 1;
  }(&polls));
  while (polls.load() == 0) {
    std::this_thread::yield();
  }
  h.cancel();
  EXPECT_EQ(corio::sync_wait(std::move(h)), 1);
}

TEST(cancellation, shielded_cleanup_finishes_even_though_the_task_was_cancelled) {
  corio::runtime rt(one_worker());
  std::atomic<bool> cleaned{false};
  auto h = rt.spawn([](std::atomic<bool>* done) -> corio::task<void> {
    bool was_cancelled = false;
    try {
      co_await corio::sleep_for(10s);
    } catch (const corio::cancelled&) {
      was_cancelled = true;  // C++ allows no co_await inside a handler
    }
    if (was_cancelled) {
      co_await corio::shield(corio::sleep_for(5ms));  // would throw at once without the shield
      done->store(true);
      throw corio::cancelled();
    }
  }(&cleaned));
  std::this_thread::sleep_for(5ms);
  h.cancel();
  EXPECT_THROW(corio::sync_wait(std::move(h)), corio::cancelled);
  EXPECT_TRUE(cleaned.load());
}

TEST(cancellation, after_the_shield_the_next_suspension_point_sees_the_cancellation_again) {
  corio::runtime rt(one_worker());
  auto h = rt.spawn([]() -> corio::task<void> {
    co_await corio::shield(corio::sleep_for(20ms));
    co_await corio::yield();
  }());
  h.cancel();
  EXPECT_THROW(corio::sync_wait(std::move(h)), corio::cancelled);
}

TEST(cancellation, with_stop_token_cancels_when_the_users_token_is_requested) {
  corio::runtime rt(one_worker());
  std::stop_source source;
  std::thread requester([&] {
    std::this_thread::sleep_for(10ms);
    source.request_stop();
  });
  EXPECT_THROW(rt.block_on(corio::with_stop_token(source.get_token(), []() -> corio::task<void> {
                 co_await corio::sleep_for(10s);
               }())),
               corio::cancelled);
  requester.join();
}

// with_stop_token re-linked a shielded body to its token (and to the awaiting task), so the token
// cancelled what shield promised to protect (a review). The body's own stop wins, as it does wherever
// a task starts.
TEST(cancellation, with_stop_token_keeps_a_shielded_body_shielded) {
  corio::runtime rt(one_worker());
  std::stop_source source;
  source.request_stop();
  EXPECT_EQ(rt.block_on(corio::with_stop_token(source.get_token(), corio::shield([]() -> corio::task<int> {
              co_await corio::sleep_for(2ms);
              co_return 7;
            }()))),
            7);
}

// A stop request whose callback ends the state it runs on: the semaphore wait parks on a plain thread
// (sync_wait's), so its stop callback resumes the chain inline on the requesting thread, and the chain
// goes on to destroy with_stop_token's frame (and when_any's), which hold the states the request is
// running on. The request must not touch them afterwards: it locked the freed state before the fix
// (ASan: heap-use-after-free with CORIO_FRAME_POOL=off, which the ctest entry
// stop_state_destroyed_inside_its_own_request sets; pooled, it wrote into a recycled frame).
TEST(cancellation, a_stop_request_whose_callback_ends_the_state_it_runs_on_touches_it_no_more) {
  for (bool through_when_any : {false, true}) {
    corio::semaphore never{0};
    corio::semaphore never_either{0};
    std::stop_source source;
    int result = 0;
    std::thread waiter([&] {
      result = corio::sync_wait([](std::stop_token token, corio::semaphore& a, corio::semaphore& b,
                                   bool through_when_any) -> corio::task<int> {
        try {
          if (through_when_any) {
            auto won = co_await corio::with_stop_token(token, corio::when_any(a.acquire(), b.acquire()));
            co_return static_cast<int>(won.index());
          }
          co_await corio::with_stop_token(token, [](corio::semaphore& a) -> corio::task<void> {
            co_await a.acquire();
          }(a));
          co_return 1;
        } catch (const corio::cancelled&) {
        }
        co_return -1;
      }(source.get_token(), never, never_either, through_when_any));
    });
    std::this_thread::sleep_for(50ms);  // the waiter parks (a late park sees the request at once instead)
    source.request_stop();
    waiter.join();
    EXPECT_EQ(result, -1) << "through when_any: " << through_when_any;
  }
}

}  // namespace
