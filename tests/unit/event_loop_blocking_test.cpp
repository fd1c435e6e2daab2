// spawn_blocking on an event loop: the loop's own blocking pool (event_loop.hpp, "Blocking calls").
// What a user of a single-thread loop expects from tokio's current-thread runtime: a blocking call
// runs beside the loop, which keeps serving its other tasks; its result, or its exception, comes back
// on the loop's thread; a deadline leaves it running, detached; and the loop's destructor destroys
// every frame, an awaiting one included (its call runs on, detached), and the posted functors before
// it waits for the running calls, so it never waits for a call that only their destruction ends.
#include <corio/channel.hpp>
#include <corio/errors.hpp>
#include <corio/event.hpp>
#include <corio/event_loop.hpp>
#include <corio/runtime.hpp>
#include <corio/sync_wait.hpp>
#include <corio/task.hpp>
#include <corio/time.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>


using namespace std::chrono_literals;

namespace {

// Waits (off the loop) until `flag` is set, for at most 10 s; whether it was.
bool wait_for(const std::atomic<bool>& flag) {
  auto give_up = std::chrono::steady_clock::now() + 10s;
  while (!flag.load() && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(1ms);
  }
  return flag.load();
}

corio::task<void> set_flag(std::shared_ptr<std::atomic<bool>> flag) {
  flag->store(true);
  co_return;
}

// The call does not return until a task on the loop has run, so the loop ran while it blocked; it
// reports the thread it ran on.
corio::task<void> block_beside_another_task() {
  auto other_ran = std::make_shared<std::atomic<bool>>(false);
  corio::spawn(set_flag(other_ran)).detach();
  auto call = [other_ran] { return std::make_pair(wait_for(*other_ran), std::this_thread::get_id()); };
  auto op = corio::spawn_blocking(call);
  auto [loop_ran_meanwhile, call_thread] = co_await std::move(op);
  EXPECT_TRUE(loop_ran_meanwhile) << "the loop stood still while the call blocked";
  EXPECT_NE(call_thread, std::this_thread::get_id());
}

TEST(event_loop_blocking, a_call_runs_on_another_thread_while_the_loop_serves_its_other_tasks) {
  corio::event_loop loop;
  loop.block_on(block_beside_another_task());
}

TEST(event_loop_blocking, the_value_and_the_exception_of_a_call_come_back_to_the_loop_thread) {
  corio::event_loop loop;
  const auto loop_thread = std::this_thread::get_id();
  auto body = [loop_thread]() -> corio::task<std::string> {
    auto failing = [] {
      throw std::runtime_error("from the pool");
      return 0;
    };
    auto op = corio::spawn_blocking(failing);
    EXPECT_THROW(co_await std::move(op), std::runtime_error);
    EXPECT_EQ(std::this_thread::get_id(), loop_thread);
    auto make = [] { return std::string("made off the loop"); };
    auto made = corio::spawn_blocking(make);
    std::string value = co_await std::move(made);
    EXPECT_EQ(std::this_thread::get_id(), loop_thread);
    co_return value;
  };
  EXPECT_EQ(loop.block_on(body()), "made off the loop");
}

// A deadline ends the await at once; the call runs on, detached, and still returns.
TEST(event_loop_blocking, a_deadline_returns_at_once_and_leaves_the_call_running) {
  auto release = std::make_shared<std::atomic<bool>>(false);
  auto returned = std::make_shared<std::atomic<bool>>(false);
  {
    corio::event_loop loop;
    auto body = [release, returned]() -> corio::task<void> {
      auto call = [release, returned] {
        wait_for(*release);
        returned->store(true);
      };
      auto op = corio::spawn_blocking(call);
      EXPECT_THROW(co_await corio::with_timeout(20ms, std::move(op)), corio::timed_out);
    };
    loop.block_on(body());
    EXPECT_FALSE(returned->load());
    release->store(true);
  }  // the destructor waits for the call to return
  EXPECT_TRUE(returned->load());
}

// A call that returns while no thread runs the loop wakes its task in the loop's next run.
TEST(event_loop_blocking, a_call_returning_between_two_runs_resumes_its_task_in_the_next) {
  corio::event_loop loop;
  auto release = std::make_shared<std::atomic<bool>>(false);
  auto returned = std::make_shared<std::atomic<bool>>(false);
  int result = 0;
  auto waiter = [&result, release, returned]() -> corio::task<void> {
    auto call = [release, returned] {
      wait_for(*release);
      returned->store(true);
      return 42;
    };
    auto op = corio::spawn_blocking(call);
    result = co_await std::move(op);
  };
  loop.spawn(waiter());
  loop.run_until_idle();  // the task is parked on the call
  EXPECT_EQ(result, 0);
  release->store(true);
  ASSERT_TRUE(wait_for(*returned));
  auto resumed = [&result]() -> corio::task<void> {
    while (result == 0) {
      co_await corio::sleep_for(1ms);
    }
  };
  EXPECT_NO_THROW(loop.block_on(resumed()));
  EXPECT_EQ(result, 42);
}

// Destroyed while a call runs, the loop destroys the frame awaiting it at once (the call runs on,
// detached, as for a cancelled awaiter: it was given copies) and returns once the call has.
struct frame_marker {
  std::shared_ptr<std::atomic<bool>> destroyed;
  ~frame_marker() { destroyed->store(true); }
};

corio::task<void> park_on_a_slow_call(std::shared_ptr<std::atomic<bool>> destroyed,
                                      std::shared_ptr<std::atomic<bool>> started,
                                      std::shared_ptr<std::atomic<bool>> frame_gone_before_return) {
  frame_marker marker{destroyed};
  auto call = [destroyed, started, frame_gone_before_return] {
    started->store(true);
    frame_gone_before_return->store(wait_for(*destroyed));
  };
  auto op = corio::spawn_blocking(call);
  co_await std::move(op);
}

TEST(event_loop_blocking, the_destructor_destroys_a_frame_awaiting_a_call_and_waits_for_the_call) {
  auto destroyed = std::make_shared<std::atomic<bool>>(false);
  auto started = std::make_shared<std::atomic<bool>>(false);
  auto frame_gone_before_return = std::make_shared<std::atomic<bool>>(false);
  {
    corio::event_loop loop;
    loop.spawn(park_on_a_slow_call(destroyed, started, frame_gone_before_return));
    loop.run_until_idle();
    ASSERT_TRUE(wait_for(*started));
  }
  EXPECT_TRUE(frame_gone_before_return->load()) << "the destructor returned before the call did, or kept the frame";
}

// A call that waits on a channel whose sender another parked task holds: the destructor must destroy
// that task's frame (closing the channel, which ends the call) before it waits for the pool, or it
// would wait forever.
corio::task<void> hold_until(std::shared_ptr<corio::event> never, corio::sender<int> held) {
  co_await never->wait();
  (void)held;
}

corio::task<void> drain_off_the_loop(corio::receiver<int> from, std::shared_ptr<std::atomic<bool>> started,
                                     std::shared_ptr<std::atomic<bool>> call_ended) {
  auto call = [from = std::move(from), started, call_ended]() mutable {
    started->store(true);
    while (from.recv_blocking()) {
    }
    call_ended->store(true);
  };
  auto op = corio::spawn_blocking(std::move(call));
  co_await std::move(op);
}

TEST(event_loop_blocking, the_destructor_does_not_wait_for_a_call_that_only_a_frame_s_destruction_ends) {
  auto [tx, rx] = corio::channel<int>(1);
  auto call_ended = std::make_shared<std::atomic<bool>>(false);
  auto started = std::make_shared<std::atomic<bool>>(false);
  auto never = std::make_shared<corio::event>();
  {
    corio::event_loop loop;
    loop.spawn(hold_until(never, std::move(tx)));
    loop.spawn(drain_off_the_loop(std::move(rx), started, call_ended));
    loop.run_until_idle();
    ASSERT_TRUE(wait_for(*started));
  }
  EXPECT_TRUE(call_ended->load());
}

// Two tasks of a pipeline, each in a blocking call: one drains a channel whose sender the other's
// frame holds. The destructor ends the drain by destroying that frame, which waits in a call of its
// own (a review found that keeping every frame that awaits a call until the pool has stopped waited
// forever here).
corio::task<void> feed_in_steps(corio::sender<int> tx, std::shared_ptr<std::atomic<bool>> started) {
  for (int i = 0;; ++i) {
    auto step = [started] {
      started->store(true);
      std::this_thread::sleep_for(20ms);
    };
    auto op = corio::spawn_blocking(step);
    co_await std::move(op);
    if (!co_await tx.send(i)) {
      co_return;
    }
  }
}

TEST(event_loop_blocking, the_destructor_ends_a_pipeline_whose_stages_wait_in_blocking_calls) {
  auto [tx, rx] = corio::channel<int>(1);
  auto drain_started = std::make_shared<std::atomic<bool>>(false);
  auto feed_started = std::make_shared<std::atomic<bool>>(false);
  auto call_ended = std::make_shared<std::atomic<bool>>(false);
  {
    corio::event_loop loop;
    loop.spawn(drain_off_the_loop(std::move(rx), drain_started, call_ended));
    loop.spawn(feed_in_steps(std::move(tx), feed_started));
    loop.run_until_idle();
    ASSERT_TRUE(wait_for(*drain_started));
    ASSERT_TRUE(wait_for(*feed_started));
  }
  EXPECT_TRUE(call_ended->load());
}

// A posted functor that never ran holds the sender a blocking call drains: the destructor destroys
// it before it waits for the call (it was destroyed last, after that wait, which never ended).
TEST(event_loop_blocking, the_destructor_drops_posted_functors_before_it_waits_for_the_calls) {
  auto [tx, rx] = corio::channel<int>(1);
  auto started = std::make_shared<std::atomic<bool>>(false);
  auto call_ended = std::make_shared<std::atomic<bool>>(false);
  {
    corio::event_loop loop;
    loop.spawn(drain_off_the_loop(std::move(rx), started, call_ended));
    loop.run_until_idle();
    ASSERT_TRUE(wait_for(*started));
    ASSERT_TRUE(loop.post([held = std::move(tx)] { (void)held; }));  // accepted: the loop is not running
  }
  EXPECT_TRUE(call_ended->load());
}

// The loop's pool has 64 threads: with all of them busy, a 65th call waits in its queue, and the
// destructor drops it unrun (as a runtime's shutdown does) while it waits for the 64 to return.
corio::task<void> call_once(std::shared_ptr<std::atomic<bool>> release, std::shared_ptr<std::atomic<int>> started) {
  auto call = [release, started] {
    started->fetch_add(1);
    wait_for(*release);
  };
  auto op = corio::spawn_blocking(call);
  co_await std::move(op);
}

TEST(event_loop_blocking, the_destructor_waits_for_running_calls_and_drops_those_not_started) {
  constexpr int pool_threads = 64;
  auto release = std::make_shared<std::atomic<bool>>(false);
  auto started = std::make_shared<std::atomic<int>>(0);
  auto queued_started = std::make_shared<std::atomic<int>>(0);
  std::thread releaser;
  {
    corio::event_loop loop;
    for (int i = 0; i < pool_threads; ++i) {
      loop.spawn(call_once(release, started));
    }
    loop.run_until_idle();
    for (int i = 0; i < 10'000 && started->load() < pool_threads; ++i) {
      std::this_thread::sleep_for(1ms);
    }
    ASSERT_EQ(started->load(), pool_threads);
    loop.spawn(call_once(release, queued_started));
    loop.run_until_idle();
    releaser = std::thread([release] {
      std::this_thread::sleep_for(100ms);  // the destructor is waiting by then, or is about to
      release->store(true);
    });
  }
  releaser.join();
  EXPECT_EQ(queued_started->load(), 0) << "a call no thread had taken ran during the destruction";
}

TEST(event_loop_blocking, a_plain_thread_has_no_pool) {
  auto body = []() -> corio::task<void> {
    auto op = corio::spawn_blocking([] {});
    co_await std::move(op);
  };
  try {
    corio::sync_wait(body());
    ADD_FAILURE() << "spawn_blocking under sync_wait on a plain thread did not throw";
  } catch (const std::logic_error& error) {
    EXPECT_NE(std::string(error.what()).find("event loop"), std::string::npos) << error.what();
  }
}

// In a death test's child: the loop's destructor, run by the loop's own blocking call once the run
// has returned (deleted during the run, it would abort for that instead).
void destroy_a_loop_from_its_own_blocking_call() {
  auto* loop = new corio::event_loop;
  auto run_returned = std::make_shared<std::atomic<bool>>(false);
  auto body = [loop, run_returned]() -> corio::task<void> {
    auto destroy = [loop, run_returned] {
      wait_for(*run_returned);
      delete loop;
    };
    auto op = corio::spawn_blocking(destroy);
    co_await std::move(op);
  };
  loop->spawn(body());
  loop->run_until_idle();
  run_returned->store(true);
  std::this_thread::sleep_for(10s);
}

TEST(event_loop_blocking_death, a_loop_destroyed_by_its_own_blocking_call_aborts_with_a_message) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(destroy_a_loop_from_its_own_blocking_call(), "destroyed by one of its own spawn_blocking calls");
}

}  // namespace
