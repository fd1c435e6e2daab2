#include <corio/event_loop.hpp>
#include <corio/sync_wait.hpp>
#include <corio/task.hpp>

#include <gtest/gtest.h>

#include <stdexcept>
#include <thread>

namespace {

TEST(sync_wait, returns_the_value_of_a_synchronous_task) {
  auto seven = []() -> corio::task<int> { co_return 7; };
  EXPECT_EQ(corio::sync_wait(seven()), 7);
}

TEST(sync_wait, rethrows_the_exception) {
  auto failing = []() -> corio::task<void> {
    throw std::out_of_range("nope");
    co_return;
  };
  EXPECT_THROW(corio::sync_wait(failing()), std::out_of_range);
}

TEST(sync_wait, blocks_until_a_task_finishes_on_another_thread) {
  corio::event_loop loop;
  std::thread runner([&] { loop.run(); });
  const std::thread::id runner_id = runner.get_id();
  auto hop = [&]() -> corio::task<std::thread::id> {
    co_await corio::schedule_on(loop);
    co_return std::this_thread::get_id();
  };
  std::thread::id ran_on = corio::sync_wait(hop());
  EXPECT_EQ(ran_on, runner_id);
  loop.stop();
  runner.join();
}

TEST(sync_wait, accepts_any_awaitable) {
  struct ready_value {
    bool await_ready() const noexcept { return true; }
    void await_suspend(std::coroutine_handle<>) const noexcept {}
    int await_resume() const noexcept { return 11; }
  };
  EXPECT_EQ(corio::sync_wait(ready_value{}), 11);
}

}  // namespace
