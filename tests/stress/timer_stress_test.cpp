// Stress: per-worker timers (detail/timer_queue.hpp) on a runtime: sleeps cancelled from other
// threads, with_timeout operands completed on another worker (the timer is disarmed away from its
// queue), a parked worker's deadline while the other worker is busy, and shutdown with timers pending.
// Bounded counts; TSan checks the cross-thread paths.
#include <corio/event.hpp>
#include <corio/event_loop.hpp>
#include <corio/join_handle.hpp>
#include <corio/runtime.hpp>
#include <corio/sync_wait.hpp>
#include <corio/task.hpp>
#include <corio/time.hpp>
#include <corio/yield.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "support/lifetime.hpp"

using namespace std::chrono_literals;

namespace {

corio::task<void> sleep_long(std::atomic<int>* cancelled, corio::test::counted token) {
  try {
    co_await corio::sleep_for(1h);
  } catch (const corio::cancelled&) {
    cancelled->fetch_add(1);
  }
  (void)token;
}

// Each sleep's timer sits on the worker that armed it; the cancel comes from this thread, the task is
// resumed on whichever worker takes it from the injection queue, and disarms from there.
TEST(timer_stress, sleeps_cancelled_from_another_thread_wake_once_and_free_everything) {
  corio::test::lifetime_counts counts;
  std::atomic<int> cancelled{0};
  constexpr int tasks = 2000;
  {
    corio::runtime rt(corio::runtime::options{.workers = 2});
    std::vector<corio::join_handle<void>> handles;
    for (int i = 0; i < tasks; ++i) {
      handles.push_back(rt.spawn(sleep_long(&cancelled, corio::test::counted(counts))));
    }
    std::minstd_rand random(7);
    for (auto& each : handles) {
      if (random() % 8 == 0) {
        std::this_thread::sleep_for(std::chrono::microseconds(random() % 50));
      }
      each.cancel();
    }
    for (auto& each : handles) {
      corio::sync_wait(std::move(each));
    }
  }
  EXPECT_EQ(cancelled.load(), tasks);
  EXPECT_EQ(counts.alive.load(), 0);
}

corio::task<void> wait_under_deadline(corio::event* ready, std::atomic<int>* woken) {
  co_await corio::with_timeout(1h, ready->wait());
  woken->fetch_add(1);
}

corio::task<void> set_later(corio::event* ready) {
  co_await corio::yield();
  ready->set();
}

// The waiter arms its deadline where it runs; the event is set by a task on any worker, which resumes
// the waiter in its own LIFO slot: its disarm is often a remote cancel, dropped by the owner later.
TEST(timer_stress, with_timeout_operands_completed_on_another_worker_disarm_their_deadline) {
  constexpr int rounds = 2000;
  std::atomic<int> woken{0};
  corio::runtime rt(corio::runtime::options{.workers = 2});
  rt.block_on([](std::atomic<int>* woken) -> corio::task<void> {
    for (int round = 0; round < rounds; ++round) {
      auto ready = std::make_unique<corio::event>();
      auto waiter = corio::spawn(wait_under_deadline(ready.get(), woken));
      auto setter = corio::spawn(set_later(ready.get()));
      co_await std::move(waiter);
      co_await std::move(setter);
    }
  }(&woken));
  EXPECT_EQ(woken.load(), rounds);
}

// One worker spins without suspending; the other, idle, parks with its own earliest deadline as the
// wait timeout and wakes on time by itself.
TEST(timer_stress, a_parked_workers_timer_fires_while_the_other_worker_is_busy) {
  corio::runtime rt(corio::runtime::options{.workers = 2});
  std::atomic<bool> spinning{false};
  std::atomic<bool> stop_spinning{false};
  std::thread::id busy_thread;
  auto busy = rt.spawn([](std::atomic<bool>* spinning, std::atomic<bool>* stop, std::thread::id* where) -> corio::task<void> {
    *where = std::this_thread::get_id();
    spinning->store(true);
    auto until = corio::clock::now() + 5s;
    while (!stop->load() && corio::clock::now() < until) {
    }
    co_return;
  }(&spinning, &stop_spinning, &busy_thread));
  while (!spinning.load()) {
    std::this_thread::yield();
  }
  auto sleeper = rt.spawn([]() -> corio::task<std::pair<corio::clock::duration, std::thread::id>> {
    auto start = corio::clock::now();
    co_await corio::sleep_for(20ms);
    co_return std::pair{corio::clock::now() - start, std::this_thread::get_id()};
  }());
  auto [slept, where] = corio::sync_wait(std::move(sleeper));
  stop_spinning.store(true);
  corio::sync_wait(std::move(busy));
  EXPECT_GE(slept, 20ms);
  EXPECT_LT(slept, 2s);  // the busy worker would have held it for 5 s
  EXPECT_NE(where, busy_thread);
}

corio::task<void> pending_forever(corio::event* never, corio::test::counted token) {
  co_await corio::with_timeout(1h, never->wait());
  (void)token;
}

corio::task<void> asleep_forever(corio::test::counted token) {
  co_await corio::sleep_for(1h);
  (void)token;
}

// Timers still armed when their executor goes: a runtime cancels the tasks (their timers are disarmed
// as they wake), a loop destroys its uncancellable roots suspended with timers armed. Every frame is
// destroyed once (the counts), and LSan sees no entry or frame leak.
TEST(timer_stress, shutdown_with_pending_timers_destroys_every_frame_once) {
  corio::test::lifetime_counts counts;
  corio::event never;  // outlives the executors: their waiters unlink from it
  {
    corio::runtime rt(corio::runtime::options{.workers = 2});
    for (int i = 0; i < 1000; ++i) {
      rt.spawn(asleep_forever(corio::test::counted(counts))).detach();
      rt.spawn(pending_forever(&never, corio::test::counted(counts))).detach();
    }
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(counts.alive.load(), 0);
  {
    corio::event_loop loop;
    for (int i = 0; i < 1000; ++i) {
      loop.spawn(asleep_forever(corio::test::counted(counts)));
      loop.spawn(pending_forever(&never, corio::test::counted(counts)));
    }
    loop.run_until_idle();
    EXPECT_EQ(counts.alive.load(), 2000);
  }
  EXPECT_EQ(counts.alive.load(), 0);
}

}  // namespace
