#include <corio/cancellation.hpp>
#include <corio/event.hpp>
#include <corio/runtime.hpp>
#include <corio/sync_wait.hpp>
#include <corio/task.hpp>
#include <corio/time.hpp>
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

}  // namespace
