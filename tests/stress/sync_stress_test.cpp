// Stress: the sync primitives with waiters, wakers and cancellers on several event loops and plain
// threads at once. Bounded in count (and so in time). Each test checks an exact outcome (a count,
// the permits left, every waiter finished); a lost wake-up leaves a waiter parked forever and the
// test hits its ctest timeout; TSan checks the rest.
#include <corio/async_mutex.hpp>
#include <corio/condition_variable.hpp>
#include <corio/event.hpp>
#include <corio/event_loop.hpp>
#include <corio/join_handle.hpp>
#include <corio/runtime.hpp>
#include <corio/semaphore.hpp>
#include <corio/sync_wait.hpp>
#include <corio/task.hpp>
#include <corio/wait_group.hpp>
#include <corio/when_any.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <deque>
#include <memory>
#include <random>
#include <stop_token>
#include <thread>
#include <vector>

#include "support/cancel.hpp"
#include "support/loops.hpp"

namespace {

using corio::test::cancellable_by;
using corio::test::loop_thread;

struct loop_pool {
  explicit loop_pool(int n) {
    for (int i = 0; i < n; ++i) {
      loops.push_back(std::make_unique<loop_thread>());
    }
  }
  loop_thread& operator[](std::size_t i) { return *loops[i % loops.size()]; }
  std::vector<std::unique_ptr<loop_thread>> loops;
};

// One round of `tasks` workers spread over `loops`; every other one gets a stop source (and is told
// so: make_worker(latch, cancellable)), which this (plain) thread requests at a random moment while
// they run, so cancellations land on parked, granted-but-not-yet-resumed and running waiters alike.
template <class MakeWorker>
void run_round_with_cancels(loop_pool& loops, int tasks, std::minstd_rand& random, MakeWorker make_worker) {
  corio::latch finished(tasks);
  std::vector<std::stop_source> stops(static_cast<std::size_t>(tasks));
  std::vector<std::stop_token> tokens;
  for (auto& stop : stops) {
    tokens.push_back(stop.get_token());
  }
  for (std::size_t t = 0; t < stops.size(); ++t) {
    loops[t].spawn(t % 2 == 0 ? cancellable_by(tokens[t], make_worker(finished, true)) : make_worker(finished, false));
  }
  for (std::size_t t = 0; t < stops.size(); t += 2) {
    std::this_thread::sleep_for(std::chrono::microseconds(random() % 400));
    stops[t].request_stop();
  }
  corio::sync_wait(finished.wait());
}

TEST(sync_stress, mutex_counter_is_exact_with_four_loops_and_cross_thread_cancels) {
  constexpr int rounds = 20;
  constexpr int tasks = 12;
  constexpr int iterations = 100;
  corio::async_mutex mutex;
  long counter = 0;  // not atomic: the mutex is the only protection
  std::atomic<long> increments{0};
  std::atomic<int> cancellations{0};
  // A cancellable worker goes on until its cancel arrives, so every round has cancels to race.
  auto worker = [&](corio::latch& finished, bool cancellable) -> corio::task<void> {
    try {
      for (int i = 0; cancellable || i < iterations; ++i) {
        auto guard = co_await mutex.lock();
        long seen = counter;
        if (i % 4 == 0) {
          co_await corio::yield();  // may throw cancelled: the guard unlocks on the way out
        }
        counter = seen + 1;
        increments.fetch_add(1, std::memory_order_relaxed);
      }
    } catch (const corio::cancelled&) {
      cancellations.fetch_add(1, std::memory_order_relaxed);
    }
    finished.count_down();
  };
  {
    loop_pool loops(4);
    std::minstd_rand random(11);
    for (int round = 0; round < rounds; ++round) {
      run_round_with_cancels(loops, tasks, random, worker);
    }
  }
  EXPECT_EQ(counter, increments.load());
  EXPECT_GT(cancellations.load(), 0);
  EXPECT_GE(counter, long{rounds} * (tasks / 2) * iterations);  // the uncancelled half always finishes
  EXPECT_TRUE(mutex.try_lock());
  mutex.unlock();
}

TEST(sync_stress, semaphore_conserves_permits_under_grant_and_cancel_races) {
  constexpr int rounds = 20;
  constexpr int tasks = 12;
  constexpr int iterations = 100;
  constexpr std::size_t permits = 3;
  corio::semaphore sem(permits);
  std::atomic<int> holders{0};
  std::atomic<int> over_limit{0};
  std::atomic<long> acquired{0};
  auto worker = [&](corio::latch& finished, bool) -> corio::task<void> {
    for (int i = 0; i < iterations; ++i) {
      try {
        co_await sem.acquire();
      } catch (const corio::cancelled&) {
        break;
      }
      acquired.fetch_add(1);
      if (holders.fetch_add(1) + 1 > static_cast<int>(permits)) {
        over_limit.fetch_add(1);
      }
      bool stopped = false;
      try {
        co_await corio::yield();
      } catch (const corio::cancelled&) {
        stopped = true;
      }
      holders.fetch_sub(1);
      sem.release();
      if (stopped) {
        break;
      }
    }
    finished.count_down();
  };
  {
    loop_pool loops(4);
    std::minstd_rand random(5);
    for (int round = 0; round < rounds; ++round) {
      run_round_with_cancels(loops, tasks, random, worker);
      EXPECT_EQ(sem.available(), permits);
    }
  }
  EXPECT_EQ(over_limit.load(), 0);
  EXPECT_GE(acquired.load(), long{rounds} * (tasks / 2) * iterations);  // the uncancelled half
  EXPECT_EQ(sem.available(), permits);
}

TEST(sync_stress, auto_reset_ping_pong_across_two_loops_is_exactly_once) {
  constexpr int rounds = 20'000;
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
      EXPECT_EQ(pongs, pings);  // b ran exactly once per ping before setting pong
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
    loop_pool loops(2);
    loops[1].spawn(b());
    loops[0].spawn(a());
    corio::sync_wait(done.wait());
  }
  EXPECT_EQ(pongs, rounds);
  EXPECT_FALSE(ping.try_wait());
  EXPECT_FALSE(pong.try_wait());
}

TEST(sync_stress, manual_event_set_racing_with_waits_wakes_every_waiter) {
  constexpr int rounds = 150;
  constexpr int waiters = 8;
  auto waiter = [](corio::event& ev, corio::latch& woken) -> corio::task<void> {
    co_await ev.wait();
    woken.count_down();
  };
  loop_pool loops(3);
  std::minstd_rand random(3);
  for (int round = 0; round < rounds; ++round) {
    corio::event ev;
    corio::latch woken(waiters);
    for (int w = 0; w < waiters; ++w) {
      loops[static_cast<std::size_t>(w)].spawn(waiter(ev, woken));
    }
    if (random() % 2 == 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(random() % 100));
    }
    ev.set();  // races with the waiters registering on three other threads
    corio::sync_wait(woken.wait());
  }
  SUCCEED();
}

TEST(sync_stress, wait_group_fan_out_fan_in_rounds_never_lose_the_last_done) {
  constexpr int rounds = 150;
  constexpr int jobs = 12;
  auto job = [](corio::wait_group& wg) -> corio::task<void> {
    co_await corio::yield();
    wg.done();
  };
  auto joiner = [](corio::wait_group& wg, corio::event& joined) -> corio::task<void> {
    co_await wg.wait();
    joined.set();
  };
  loop_pool loops(3);
  for (int round = 0; round < rounds; ++round) {
    corio::wait_group wg;
    corio::event joined;
    wg.add(jobs);
    loops[static_cast<std::size_t>(round)].spawn(joiner(wg, joined));
    for (int j = 0; j < jobs; ++j) {
      loops[static_cast<std::size_t>(j)].spawn(job(wg));
    }
    corio::sync_wait(joined.wait());
    EXPECT_EQ(wg.count(), 0);
  }
}

TEST(sync_stress, bounded_queue_on_condition_variables_passes_every_item_once) {
  constexpr int producers = 3;
  constexpr int consumers = 3;
  constexpr int items_each = 1000;
  constexpr std::size_t capacity = 4;
  corio::async_mutex mutex;
  corio::condition_variable not_full;
  corio::condition_variable not_empty;
  std::deque<long> queue;
  long sum = 0;
  int received = 0;
  corio::latch finished(producers + consumers);
  constexpr int total = producers * items_each;
  auto producer = [&](int id) -> corio::task<void> {
    for (int i = 0; i < items_each; ++i) {
      auto guard = co_await mutex.lock();
      co_await not_full.wait(guard, [&] { return queue.size() < capacity; });
      queue.push_back(long{id} * items_each + i);
      guard.unlock();
      not_empty.notify_one();
    }
    finished.count_down();
  };
  auto consumer = [&]() -> corio::task<void> {
    for (;;) {
      auto guard = co_await mutex.lock();
      co_await not_empty.wait(guard, [&] { return !queue.empty() || received == total; });
      if (queue.empty()) {
        break;  // every item has been received
      }
      sum += queue.front();
      queue.pop_front();
      if (++received == total) {
        not_empty.notify_all();  // release the other consumers
      }
      guard.unlock();
      not_full.notify_one();
    }
    finished.count_down();
  };
  {
    loop_pool loops(3);
    for (int c = 0; c < consumers; ++c) {
      loops[static_cast<std::size_t>(c)].spawn(consumer());
    }
    for (int p = 0; p < producers; ++p) {
      loops[static_cast<std::size_t>(p + 1)].spawn(producer(p));
    }
    corio::sync_wait(finished.wait());
  }
  EXPECT_EQ(received, total);
  EXPECT_EQ(sum, long{total} * (total - 1) / 2);
  EXPECT_TRUE(queue.empty());
}

// Five kinds of waiter parked on every primitive at once, for the tests that tear their executor down
// underneath them. Declared before the executor, so it outlives every frame parked on it.
struct parked_on_every_primitive {
  static constexpr int kinds = 5;

  explicit parked_on_every_primitive(int each) : started(kinds * each) { wg.add(1); }

  corio::async_mutex mutex;
  corio::semaphore sem{0};
  corio::event ev;
  corio::auto_reset_event are;
  corio::wait_group wg;
  corio::condition_variable cv;
  corio::latch started;

  corio::task<void> waits_mutex_then_sem() {
    started.count_down();
    auto guard = co_await mutex.lock();
    co_await sem.acquire();
  }
  corio::task<void> waits_ev() {
    started.count_down();
    co_await ev.wait();
  }
  corio::task<void> waits_are() {
    started.count_down();
    co_await are.wait();
  }
  corio::task<void> waits_wg() {
    started.count_down();
    co_await wg.wait();
  }
  corio::task<void> waits_cv() {
    started.count_down();
    auto guard = co_await mutex.lock();
    co_await cv.wait(guard);
  }

  /// Hands one waiter of each kind to `spawn`.
  template <class Spawn>
  void spawn_one_of_each(Spawn spawn) {
    spawn(waits_mutex_then_sem());
    spawn(waits_ev());
    spawn(waits_are());
    spawn(waits_wg());
    spawn(waits_cv());
  }

  /// Once every waiter has parked, wakes some after `delay`, so grants are in flight at teardown.
  void wake_some_after(std::chrono::microseconds delay) {
    corio::sync_wait(started.wait());
    std::this_thread::sleep_for(delay);
    sem.release();
    are.set();
    cv.notify_one();
  }

  /// After teardown: releases what is left (nothing may still be parked here).
  void release_the_rest() {
    ev.set();
    wg.done();
    cv.notify_all();
  }
};

TEST(sync_stress, destroying_loops_with_waiters_on_every_primitive_is_clean) {
  constexpr int each = 4;
  for (int round = 0; round < 20; ++round) {
    parked_on_every_primitive parked(each);
    {
      loop_pool loops(2);
      for (std::size_t i = 0; i < each; ++i) {
        parked.spawn_one_of_each([&](corio::task<void> waiter) { loops[i].spawn(std::move(waiter)); });
      }
      parked.wake_some_after(std::chrono::microseconds(100 * (round % 4)));
    }  // loops stop and are destroyed with frames parked (or granted) on every primitive
    EXPECT_TRUE(parked.mutex.try_lock());
    parked.mutex.unlock();
    parked.release_the_rest();
  }
}

// ---- on a work-stealing runtime: waiters and wakers migrate between workers ----

TEST(sync_stress, runtime_workers_share_a_mutex_exactly_with_join_handle_cancels) {
  constexpr int tasks = 32;
  constexpr int iterations = 150;
  corio::async_mutex mutex;
  long counter = 0;  // not atomic: the mutex is the only protection
  std::atomic<long> increments{0};
  auto worker = [&]() -> corio::task<void> {
    for (int i = 0; i < iterations; ++i) {
      auto guard = co_await mutex.lock();
      long seen = counter;
      if (i % 4 == 0) {
        co_await corio::yield();
      }
      counter = seen + 1;
      increments.fetch_add(1, std::memory_order_relaxed);
    }
  };
  int cancelled = 0;
  {
    corio::runtime rt(corio::runtime::options{.workers = 3});
    std::vector<corio::join_handle<void>> handles;
    for (int t = 0; t < tasks; ++t) {
      handles.push_back(rt.spawn(worker()));
    }
    std::minstd_rand random(17);
    for (int t = 0; t < tasks; t += 2) {  // cancel half of them from this plain thread, mid-run
      std::this_thread::sleep_for(std::chrono::microseconds(random() % 300));
      handles[static_cast<std::size_t>(t)].cancel();
    }
    for (auto& handle : handles) {
      try {
        corio::sync_wait(std::move(handle));
      } catch (const corio::cancelled&) {
        ++cancelled;
      }
    }
  }
  EXPECT_EQ(counter, increments.load());
  EXPECT_GE(counter, long{tasks / 2} * iterations);
  EXPECT_LE(cancelled, tasks / 2);
  EXPECT_TRUE(mutex.try_lock());
  mutex.unlock();
}

TEST(sync_stress, runtime_shutdown_with_waiters_on_every_primitive_is_clean) {
  constexpr int each = 4;
  for (int round = 0; round < 10; ++round) {
    parked_on_every_primitive parked(each);
    {
      corio::runtime rt(corio::runtime::options{.workers = 2});
      for (int i = 0; i < each; ++i) {
        parked.spawn_one_of_each([&](corio::task<void> waiter) { rt.spawn(std::move(waiter)).detach(); });
      }
      parked.wake_some_after(std::chrono::microseconds(100 * (round % 4)));
    }  // shutdown cancels every task (their waits throw corio::cancelled), then destroys the frames
    EXPECT_TRUE(parked.mutex.try_lock());
    parked.mutex.unlock();
    EXPECT_LE(parked.sem.available(), 1u);
    parked.release_the_rest();
  }
}

}  // namespace
