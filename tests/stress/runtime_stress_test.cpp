// Stress: the multi-thread runtime under many tasks, random yields, sleeps, cross-worker wake-ups and
// cancellations. Bounded in count and time; a lost wake-up hangs a test until its ctest timeout.
#include <corio/event.hpp>
#include <corio/runtime.hpp>
#include <corio/task.hpp>
#include <corio/time.hpp>
#include <corio/yield.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include "support/lifetime.hpp"

using namespace std::chrono_literals;

namespace {

// CORIO_STRESS_SCALE divides the counts (the sanitizer presets may set it); default full size.
int scaled(int count) {
  const char* scale = std::getenv("CORIO_STRESS_SCALE");
  int divisor = scale != nullptr ? std::atoi(scale) : 1;
  return divisor > 1 ? count / divisor : count;
}

TEST(runtime_stress, a_million_tasks_with_yields_sleeps_wakeups_and_cancels_finish_exactly_once) {
  const int tasks = scaled(1'000'000);
  corio::runtime rt(corio::runtime::options{.workers = 2, .max_blocking_threads = 4});
  std::vector<std::atomic<int>> finished(static_cast<std::size_t>(tasks));
  std::atomic<int> cancelled{0};
  std::atomic<int> completed{0};

  // Pairs of tasks wake each other through events, so wake-ups cross workers whenever one is stolen.
  auto body = [&](int id, std::shared_ptr<corio::auto_reset_event> mine,
                  std::shared_ptr<corio::auto_reset_event> partner) -> corio::task<void> {
    struct mark_once {
      std::atomic<int>& slot;
      ~mark_once() { slot.fetch_add(1, std::memory_order_relaxed); }
    } mark{finished[static_cast<std::size_t>(id)]};
    // Both partners of a pair draw the same branch, so a waiter's partner always sets its event.
    std::minstd_rand random(static_cast<unsigned>(id / 2) + 1);
    try {
      switch (random() % 4) {
        case 0:
          co_await corio::yield();
          break;
        case 1:
          co_await corio::sleep_for(std::chrono::microseconds(random() % 200));
          break;
        default:
          partner->set();
          co_await mine->wait();
          break;
      }
      completed.fetch_add(1, std::memory_order_relaxed);
    } catch (const corio::cancelled&) {
      cancelled.fetch_add(1, std::memory_order_relaxed);
    }
  };

  auto parent = [&]() -> corio::task<void> {
    constexpr int batch = 10'000;
    for (int start = 0; start < tasks; start += batch) {
      std::vector<corio::join_handle<void>> handles;
      handles.reserve(batch);
      for (int id = start; id < start + batch && id < tasks; id += 2) {
        auto a = std::make_shared<corio::auto_reset_event>();
        auto b = std::make_shared<corio::auto_reset_event>();
        handles.push_back(corio::spawn(body(id, a, b)));
        if (id + 1 < tasks) {
          handles.push_back(corio::spawn(body(id + 1, b, a)));
        }
      }
      for (std::size_t i = 0; i < handles.size(); i += 7) {
        handles[i].cancel();  // some before they start, some while they wait
      }
      for (auto& handle : handles) {
        try {
          co_await handle;
        } catch (const corio::cancelled&) {
        }
      }
    }
  };
  rt.block_on(parent());

  int wrong = 0;
  for (auto& count : finished) {
    wrong += count.load() != 1;
  }
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(completed.load() + cancelled.load(), tasks);
  EXPECT_GT(cancelled.load(), 0);
}

TEST(runtime_stress, waking_parked_workers_from_a_foreign_thread_never_loses_a_wake_up) {
  const int rounds = scaled(100'000);
  corio::runtime rt(corio::runtime::options{.workers = 2, .max_blocking_threads = 4});
  auto nothing = []() -> corio::task<int> { co_return 1; };
  long sum = 0;
  for (int i = 0; i < rounds; ++i) {
    // Each round the workers have gone idle (or are about to): the spawn must wake one.
    sum += corio::sync_wait(rt.spawn(nothing()));
  }
  EXPECT_EQ(sum, rounds);
}

TEST(runtime_stress, a_runtime_destroyed_mid_flight_frees_everything) {
  corio::test::lifetime_counts counts;
  for (int round = 0; round < 20; ++round) {
    corio::runtime rt(corio::runtime::options{.workers = 2, .max_blocking_threads = 4});
    auto event = std::make_shared<corio::event>();
    auto churn = [](corio::test::counted, std::shared_ptr<corio::event> gate) -> corio::task<void> {
      for (int i = 0; i < 1000; ++i) {
        co_await corio::yield();
        if (i % 100 == 0) {
          co_await corio::sleep_for(50us);
        }
      }
      co_await gate->wait();  // never set: blocked at shutdown
    };
    for (int i = 0; i < 500; ++i) {
      rt.spawn(churn(corio::test::counted(counts), event)).detach();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(round % 5));
  }
  EXPECT_EQ(counts.alive.load(), 0);
}

}  // namespace
