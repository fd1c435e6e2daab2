#include <corio/channel.hpp>
#include <corio/event_loop.hpp>
#include <corio/runtime.hpp>
#include <corio/sync_wait.hpp>
#include <corio/task.hpp>
#include <corio/when_all.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <coroutine>
#include <exception>
#include <optional>
#include <stdexcept>
#include <thread>
#include <tuple>

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

// A chain a plain thread drives through sync_wait used to move to the thread that woke it: a runtime
// task's send ran the receiver's code inside it, and the chain then parked with that worker as its
// owner, so a wake after the runtime was gone used the freed worker (a review; ASan:
// heap-use-after-free). It now goes on on the thread that waits in sync_wait.
TEST(sync_wait, a_chain_woken_from_a_runtime_worker_goes_on_on_the_waiting_thread) {
  auto [tx, rx] = corio::channel<int>(0);
  auto consume_two = [](corio::receiver<int>& rx, std::thread::id* first, std::thread::id* second) -> corio::task<int> {
    std::optional<int> a = co_await rx.recv();
    *first = std::this_thread::get_id();
    std::optional<int> b = co_await rx.recv();
    *second = std::this_thread::get_id();
    co_return a.value_or(0) + b.value_or(0);
  };
  std::thread feeder([&tx] {
    {
      corio::runtime rt(corio::runtime::options{.workers = 1});
      rt.block_on([](corio::sender<int>& tx) -> corio::task<void> { EXPECT_TRUE(co_await tx.send(1)); }(tx));
    }
    EXPECT_TRUE(tx.send_blocking(2));  // the runtime that sent the first value is gone
  });
  std::thread::id first;
  std::thread::id second;
  const int sum = corio::sync_wait(consume_two(rx, &first, &second));
  feeder.join();
  EXPECT_EQ(sum, 3);
  EXPECT_EQ(first, std::this_thread::get_id());
  EXPECT_EQ(second, std::this_thread::get_id());
}

// On its own thread the chain may block again (it is not on a worker), and a nested sync_wait drives
// its own chain.
TEST(sync_wait, the_waiting_thread_stays_a_plain_thread_for_the_chain) {
  auto [tx, rx] = corio::channel<int>(1);
  corio::runtime rt(corio::runtime::options{.workers = 1});
  auto sender = rt.spawn([](corio::sender<int> tx) -> corio::task<void> {
    EXPECT_TRUE(co_await tx.send(1));
    EXPECT_TRUE(co_await tx.send(2));
  }(tx));
  const int sum = corio::sync_wait([](corio::receiver<int>& rx) -> corio::task<int> {
    std::optional<int> a = co_await rx.recv();
    corio::try_recv_result<int> b = rx.recv_blocking_for(std::chrono::seconds(10));  // refused on a worker
    int nested = corio::sync_wait([]() -> corio::task<int> { co_return 4; }());
    co_return a.value_or(0) + (b.value ? *b.value : 0) + nested;
  }(rx));
  EXPECT_EQ(sum, 7);
  corio::sync_wait(std::move(sender));
}

// Nested sync_waits on one thread share its queue: an inner wait that needs a coroutine of the outer
// chain to run completes. (With a queue per sync_wait the outer one waited behind the inner for good:
// a review.)
TEST(sync_wait, a_nested_sync_wait_that_needs_the_outer_chain_completes) {
  auto [tx1, rx1] = corio::channel<int>(1);
  auto [tx2, rx2] = corio::channel<int>(1);
  auto relay = [](corio::receiver<int>& in, corio::sender<int>& out) -> corio::task<int> {
    std::optional<int> value = co_await in.recv();
    EXPECT_TRUE(co_await out.send(value.value_or(0) + 1));
    co_return 0;
  };
  auto nested = [](corio::receiver<int>& in) -> corio::task<int> {
    co_return corio::sync_wait(in.recv()).value_or(0);  // blocks the thread inside the outer chain
  };
  std::thread feeder([&tx1] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_TRUE(tx1.send_blocking(41));
  });
  auto results = corio::sync_wait(corio::when_all(relay(rx1, tx2), nested(rx2)));
  feeder.join();
  EXPECT_EQ(std::get<1>(results), 42);
}

// A coroutine of a foreign type, resumed by hand, that parked on a channel inside a sync_wait and
// outlived it: its owner was the sync_wait's stack object, which its wake-up then used (a review;
// ASan: stack-use-after-return). It is resumed inline by its waker now, as any coroutine with no owner.
struct eager_coroutine {
  struct promise_type {
    eager_coroutine get_return_object() noexcept { return {}; }
    std::suspend_never initial_suspend() const noexcept { return {}; }
    std::suspend_never final_suspend() const noexcept { return {}; }
    void return_void() const noexcept {}
    void unhandled_exception() const noexcept { std::terminate(); }
  };
};

eager_coroutine listen(corio::receiver<int>& rx, std::atomic<int>& got) {
  std::optional<int> value = co_await rx.recv();
  got = value.value_or(-1);
}

TEST(sync_wait, a_foreign_coroutine_that_parked_during_a_sync_wait_is_woken_after_it) {
  auto [tx, rx] = corio::channel<int>(0);
  std::atomic<int> got{0};
  corio::sync_wait([](corio::receiver<int>& rx, std::atomic<int>& got) -> corio::task<void> {
    listen(rx, got);  // parks: the sync_wait ends with it still waiting
    co_return;
  }(rx, got));
  std::thread sender([&tx] { EXPECT_TRUE(tx.send_blocking(7)); });
  sender.join();
  EXPECT_EQ(got.load(), 7);
  std::thread another([&tx] { EXPECT_EQ(tx.try_send(8), corio::channel_status::full); });  // nobody waits now
  another.join();
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
