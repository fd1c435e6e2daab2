#include <corio/cancellation.hpp>
#include <corio/event_loop.hpp>
#include <corio/runtime.hpp>
#include <corio/sync_wait.hpp>
#include <corio/task.hpp>
#include <corio/yield.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <stop_token>
#include <string>
#include <thread>

namespace {

corio::task<void> note_around_a_yield(std::string* log, char name) {
  *log += name;
  co_await corio::yield();
  *log += name;
}

TEST(yield, lets_every_task_already_runnable_go_first) {
  corio::event_loop loop;
  std::string log;
  loop.spawn(note_around_a_yield(&log, 'a'));
  loop.spawn(note_around_a_yield(&log, 'b'));
  loop.spawn(note_around_a_yield(&log, 'c'));
  loop.run_until_idle();
  EXPECT_EQ(log, "abcabc");
}

corio::task<int> count_yields(std::atomic<int>* yields) {
  for (;;) {
    co_await corio::yield();
    yields->fetch_add(1, std::memory_order_relaxed);
  }
}

TEST(yield, throws_cancelled_in_a_cancelled_task) {
  corio::runtime rt({.workers = 1, .max_blocking_threads = 1});
  std::atomic<int> yields{0};
  auto h = rt.spawn(count_yields(&yields));
  while (yields.load() < 100) {
    std::this_thread::yield();
  }
  h.cancel();
  EXPECT_THROW(corio::sync_wait(std::move(h)), corio::cancelled);
}

corio::task<int> yield_then_answer() {
  co_await corio::yield();
  co_return 42;
}

TEST(yield, continues_at_once_on_a_thread_with_no_executor) {
  EXPECT_EQ(corio::sync_wait(yield_then_answer()), 42);
}

TEST(yield, is_a_cancellation_point_on_a_thread_with_no_executor_too) {
  std::stop_source source;
  source.request_stop();
  EXPECT_THROW(corio::sync_wait(corio::with_stop_token(source.get_token(), yield_then_answer())), corio::cancelled);
}

}  // namespace
