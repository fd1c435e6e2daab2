// Stress: executors torn down while work crosses between them: foreign threads spawning into a
// runtime that shuts down, and tasks that hop from a runtime to a loop and join across the two,
// destroyed in both orders. Every frame must be destroyed exactly once (counted), no spawner may hang,
// and ASan/TSan must stay quiet. Bounded in rounds; CORIO_STRESS_SCALE shrinks them.
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
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include "support/lifetime.hpp"
#include "support/loops.hpp"

using namespace std::chrono_literals;

namespace {

int scaled(int count) {
  const char* scale = std::getenv("CORIO_STRESS_SCALE");
  int divisor = scale != nullptr ? std::atoi(scale) : 1;
  return divisor > 1 ? std::max(1, count / divisor) : count;
}

corio::task<int> short_life(corio::test::counted token, int yields) {
  for (int i = 0; i < yields; ++i) {
    co_await corio::yield();
  }
  co_await corio::sleep_for(1ms);
  co_return token.value();
}

TEST(teardown_stress, foreign_spawners_racing_shutdown_never_leak_or_hang) {
  corio::test::lifetime_counts counts;
  std::atomic<long> refused{0};
  std::atomic<long> finished{0};
  for (int round = 0; round < scaled(40); ++round) {
    auto rt = std::make_unique<corio::runtime>(corio::runtime::options{.workers = 2, .max_blocking_threads = 2});
    std::atomic<bool> go{false};
    std::vector<std::thread> spawners;
    for (int s = 0; s < 2; ++s) {
      spawners.emplace_back([&, s] {
        while (!go.load()) {
        }
        for (int i = 0; i < 200; ++i) {
          try {
            if (s == 0) {
              rt->spawn(short_life(corio::test::counted(counts, i), i % 3)).detach();
            } else {
              rt->block_on(short_life(corio::test::counted(counts, i), i % 3));
              finished.fetch_add(1);
            }
          } catch (const corio::runtime_stopped&) {
            refused.fetch_add(1);
          } catch (const corio::cancelled&) {
            finished.fetch_add(1);  // shut down under it: woken with cancelled, never left hanging
          }
        }
      });
    }
    go.store(true);
    std::this_thread::sleep_for(std::chrono::microseconds(200 * (round % 5)));
    rt->shutdown();
    for (auto& spawner : spawners) {
      spawner.join();
    }
    rt.reset();
    ASSERT_EQ(counts.alive.load(), 0) << "round " << round;
  }
  EXPECT_GT(refused.load() + finished.load(), 0);
}

corio::task<void> hop_sleep_and_count(corio::event_loop* loop, std::atomic<int>* hopped, corio::test::counted token,
                                      int ms) {
  co_await corio::schedule_on(*loop);
  hopped->fetch_add(1);
  co_await corio::sleep_for(std::chrono::milliseconds(ms));
  (void)token;
}

corio::task<void> join_from_loop(corio::join_handle<int> h, corio::test::counted token) {
  try {
    (void)co_await std::move(h);
  } catch (const corio::cancelled&) {
  }
  (void)token;
}

TEST(teardown_stress, runtime_and_loop_destroyed_in_either_order_with_hops_and_joins_across) {
  corio::test::lifetime_counts counts;
  for (int round = 0; round < scaled(30); ++round) {
    auto rt = std::make_unique<corio::runtime>(corio::runtime::options{.workers = 2, .max_blocking_threads = 2});
    auto away = std::make_unique<corio::test::loop_thread>();
    std::atomic<int> hopped{0};
    for (int i = 0; i < 50; ++i) {
      rt->spawn(hop_sleep_and_count(&away->loop, &hopped, corio::test::counted(counts), i % 7)).detach();
      auto h = rt->spawn(short_life(corio::test::counted(counts, i), i % 4));
      away->spawn(join_from_loop(std::move(h), corio::test::counted(counts)));
    }
    // Every hop has happened (a task that still holds a pointer to a destroyed loop would be the test's
    // bug, not corio's); the sleeps, joins and short tasks are still in flight on both sides.
    while (hopped.load() != 50) {
      std::this_thread::yield();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(round % 4));
    if (round % 2 == 0) {
      rt.reset();
      away.reset();
    } else {
      away.reset();
      rt.reset();
    }
    ASSERT_EQ(counts.alive.load(), 0) << "round " << round;
  }
}

corio::task<void> hop_or_stay(corio::event_loop* loop, std::atomic<int>* moved, std::atomic<int>* refused,
                              corio::test::counted token) {
  try {
    co_await corio::schedule_on(*loop);
    EXPECT_EQ(corio::event_loop::current(), loop);
    moved->fetch_add(1);
  } catch (const corio::loop_stopped&) {
    EXPECT_EQ(corio::event_loop::current(), nullptr);  // still on the runtime it tried to leave
    refused->fetch_add(1);
  }
  co_await corio::yield();
  (void)token;
}

// A hop is checked when the coroutine suspends but carried out only once its worker has left the
// chain; stop() landing in between must send the coroutine back where it was, with loop_stopped.
// The runtime goes first (no worker can be completing a hop after that), then the loop with whatever
// moved to it.
TEST(teardown_stress, hops_racing_the_target_loops_stop_either_move_or_throw_and_every_frame_ends) {
  corio::test::lifetime_counts counts;
  std::atomic<int> moved{0};
  std::atomic<int> refused{0};
  constexpr int per_round = 40;
  int rounds = scaled(30);
  for (int round = 0; round < rounds; ++round) {
    auto rt = std::make_unique<corio::runtime>(corio::runtime::options{.workers = 2, .max_blocking_threads = 2});
    auto away = std::make_unique<corio::test::loop_thread>();
    std::vector<corio::join_handle<void>> handles;
    for (int i = 0; i < per_round; ++i) {
      handles.push_back(rt->spawn(hop_or_stay(&away->loop, &moved, &refused, corio::test::counted(counts))));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50 * (round % 6)));
    away->loop.stop();
    rt.reset();
    away.reset();
    for (auto& h : handles) {
      try {
        corio::sync_wait(std::move(h));
      } catch (const corio::cancelled&) {
        // destroyed with the runtime before it hopped, or with the loop before it ran there
      }
    }
    ASSERT_EQ(counts.alive.load(), 0) << "round " << round;
  }
  EXPECT_LE(moved.load() + refused.load(), rounds * per_round);
  EXPECT_GT(moved.load() + refused.load(), 0);
}

// event_loop::stop() from another thread while the loop's thread returns from run() and destroys the
// loop at once, which the contract allows: stop() must not touch the loop after closing it. It read
// the loop's parker (and the parker, freed with it) after the close before the fix (TSan, ASan).
TEST(teardown_stress, a_loop_stopped_from_another_thread_may_be_destroyed_as_soon_as_run_returns) {
  for (int round = 0; round < scaled(2000); ++round) {
    auto loop = std::make_unique<corio::event_loop>();
    std::thread stopper([raw = loop.get()] { raw->stop(); });
    loop->run();
    loop.reset();
    stopper.join();
  }
}

}  // namespace
