// A runtime worker's LIFO chains (src/sched/worker.hpp): a woken task and a task that spent its budget
// behind it keep running back to back, but only for a bounded time; queued, injected and timed work
// still runs, and shutdown loses nothing left in the chain slots.
#include <corio/cancellation.hpp>
#include <corio/channel.hpp>
#include <corio/event.hpp>
#include <corio/join_handle.hpp>
#include <corio/runtime.hpp>
#include <corio/task.hpp>
#include <corio/time.hpp>
#include <corio/yield.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <thread>
#include <vector>

#include "support/lifetime.hpp"

using namespace std::chrono_literals;

namespace {

// Far more rounds than one chain bound's worth, even unsanitised: reaching it means the chain starved
// everything else.
constexpr std::uint64_t starvation_limit = 2'000'000;

corio::runtime::options workers(std::size_t n) { return {.workers = n, .max_blocking_threads = 4}; }

// Sends until `stop` is set or `limit` values went out; returns how many did.
corio::task<std::uint64_t> stream(corio::sender<std::uint64_t> tx, const std::atomic<bool>& stop, std::uint64_t limit) {
  std::uint64_t sent = 0;
  while (!stop.load(std::memory_order_relaxed) && sent < limit) {
    if (!co_await tx.send(sent)) {
      break;
    }
    ++sent;
  }
  co_return sent;
}

corio::task<std::uint64_t> drain(corio::receiver<std::uint64_t> rx) {
  std::uint64_t received = 0;
  for (;;) {
    std::optional<std::uint64_t> value = co_await rx.recv();
    if (!value) {
      co_return received;
    }
    ++received;
  }
}

corio::task<void> set_flag(std::atomic<bool>& flag) {
  flag.store(true, std::memory_order_relaxed);
  co_return;
}

// Spawns a pair (`waiter` first, so it waits when `player` starts), then, once the pair is chained, a
// queued task that sets `queued_ran`, which `player` checks each round. Returns the rounds played, or
// starvation_limit if the queued task had not run by the time the pair stopped.
corio::task<std::uint64_t> rounds_until_a_queued_task_runs(corio::task<void> waiter, corio::task<std::uint64_t> player,
                                                           std::atomic<bool>& queued_ran) {
  auto waiting = corio::spawn(std::move(waiter));
  auto playing = corio::spawn(std::move(player));
  co_await corio::yield();  // the pair is chained; the next task waits in the queue
  corio::spawn(set_flag(queued_ran)).detach();
  std::uint64_t rounds = co_await std::move(playing);
  co_await std::move(waiting);
  co_return queued_ran.load() ? rounds : starvation_limit;
}

// One worker: two tasks that wake each other through capacity-1 channels form a chain of pure LIFO
// hand-offs, which must still end so that a queued task runs.
TEST(runtime_chain, a_ping_pong_pair_does_not_starve_a_queued_task_on_one_worker) {
  corio::runtime rt(workers(1));
  auto body = []() -> corio::task<std::uint64_t> {
    std::atomic<bool> queued_ran{false};
    auto [ping_tx, ping_rx] = corio::channel<std::uint64_t>(1);
    auto [pong_tx, pong_rx] = corio::channel<std::uint64_t>(1);
    auto serve = [](corio::receiver<std::uint64_t> rx, corio::sender<std::uint64_t> tx) -> corio::task<void> {
      for (;;) {
        std::optional<std::uint64_t> value = co_await rx.recv();
        if (!value) {
          co_return;
        }
        bool sent = co_await tx.send(*value + 1);
        if (!sent) {
          co_return;
        }
      }
    };
    auto play = [&queued_ran](corio::sender<std::uint64_t> tx, corio::receiver<std::uint64_t> rx)
        -> corio::task<std::uint64_t> {
      std::uint64_t rounds = 0;
      while (!queued_ran.load(std::memory_order_relaxed) && rounds < starvation_limit) {
        bool sent = co_await tx.send(rounds);
        std::optional<std::uint64_t> answer = co_await rx.recv();
        if (!sent || !answer) {
          break;
        }
        ++rounds;
      }
      co_return rounds;
    };
    co_return co_await rounds_until_a_queued_task_runs(serve(std::move(ping_rx), std::move(pong_tx)),
                                                       play(std::move(ping_tx), std::move(pong_rx)), queued_ran);
  };
  EXPECT_LT(rt.block_on(body()), starvation_limit);
}

// One worker: a task that wakes another and then spends its budget on ready operations yields behind
// the task it woke, so the two form a chain that only the time bound ends.
TEST(runtime_chain, a_budget_yielder_and_the_task_it_wakes_do_not_starve_a_queued_task_on_one_worker) {
  corio::runtime rt(workers(1));
  auto body = []() -> corio::task<std::uint64_t> {
    std::atomic<bool> queued_ran{false};
    std::atomic<bool> done{false};
    corio::event wake;
    corio::event always_set;
    always_set.set();
    auto sleeper = [&]() -> corio::task<void> {
      while (!done.load(std::memory_order_relaxed)) {
        co_await wake.wait();
        wake.reset();
      }
    };
    auto spinner = [&]() -> corio::task<std::uint64_t> {
      std::uint64_t rounds = 0;
      while (!queued_ran.load(std::memory_order_relaxed) && rounds < starvation_limit) {
        wake.set();
        co_await always_set.wait();
        ++rounds;
      }
      done.store(true, std::memory_order_relaxed);
      wake.set();
      co_return rounds;
    };
    co_return co_await rounds_until_a_queued_task_runs(sleeper(), spinner(), queued_ran);
  };
  EXPECT_LT(rt.block_on(body()), starvation_limit);
}

// One worker: a sender that spends its budget behind the receiver it woke keeps the pair going in one
// chain; queued tasks, timers and tasks injected from another thread must all still run (timers and
// injections are served by the maintenance tick, which runs inside chains).
TEST(runtime_chain, a_budget_yielding_pair_lets_queued_timed_and_injected_work_run) {
  corio::runtime rt(workers(1));
  std::atomic<bool> queued_ran{false};
  std::atomic<bool> timer_ran{false};
  std::atomic<bool> injected_ran{false};
  std::atomic<bool> all_ran{false};
  auto after_sleep = [&timer_ran]() -> corio::task<void> {
    co_await corio::sleep_for(1ms);
    timer_ran.store(true, std::memory_order_relaxed);
  };
  auto watch = [&]() -> corio::task<void> {
    while (!(queued_ran.load() && timer_ran.load() && injected_ran.load())) {
      co_await corio::sleep_for(1ms);
    }
    all_ran.store(true);
  };
  auto body = [&]() -> corio::task<std::uint64_t> {
    auto timed = corio::spawn(after_sleep());
    auto watching = corio::spawn(watch());
    co_await corio::yield();  // both armed their timers
    auto [tx, rx] = corio::channel<std::uint64_t>(256);
    auto receiving = corio::spawn(drain(std::move(rx)));
    auto sending = corio::spawn(stream(std::move(tx), all_ran, 64 * starvation_limit));
    co_await corio::yield();
    corio::spawn(set_flag(queued_ran)).detach();
    std::thread injector([&rt, &injected_ran] { rt.spawn(set_flag(injected_ran)).detach(); });
    std::uint64_t sent = co_await sending;
    injector.join();
    co_await receiving;
    co_await timed;
    co_await watching;
    co_return sent;
  };
  EXPECT_LT(rt.block_on(body()), 64 * starvation_limit);
  EXPECT_TRUE(queued_ran.load());
  EXPECT_TRUE(timer_ran.load());
  EXPECT_TRUE(injected_ran.load());
}

// Two workers, many pairs: budget yields behind woken receivers, chains ending, and steals between
// them must deliver every value exactly once.
TEST(runtime_chain, many_streaming_pairs_on_two_workers_deliver_every_value) {
  static constexpr std::size_t pairs = 64;
  static constexpr std::uint64_t events = 2000;
  corio::runtime rt(workers(2));
  auto body = []() -> corio::task<std::uint64_t> {
    const std::atomic<bool> never{false};
    std::vector<corio::join_handle<std::uint64_t>> receiving;
    std::vector<corio::join_handle<std::uint64_t>> sending;
    for (std::size_t i = 0; i < pairs; ++i) {
      auto [tx, rx] = corio::channel<std::uint64_t>(16);
      receiving.push_back(corio::spawn(drain(std::move(rx))));
      sending.push_back(corio::spawn(stream(std::move(tx), never, events)));
    }
    std::uint64_t total = 0;
    for (auto& handle : sending) {
      std::uint64_t sent = co_await std::move(handle);
      EXPECT_EQ(sent, events);
    }
    for (auto& handle : receiving) {
      total += co_await std::move(handle);
    }
    co_return total;
  };
  EXPECT_EQ(rt.block_on(body()), pairs * events);
}

// Shielded pairs ignore the shutdown's cancellation, so the workers leave at the grace deadline with
// tasks in both chain slots; every frame must still be destroyed exactly once (and ASan sees no leak).
TEST(runtime_chain, shutdown_past_the_grace_period_destroys_the_tasks_in_the_chain_slots) {
  corio::test::lifetime_counts counts;
  std::atomic<std::uint64_t> received{0};
  auto send_forever = [](corio::sender<std::uint64_t> tx, corio::test::counted) -> corio::task<void> {
    for (std::uint64_t i = 0;; ++i) {
      bool sent = co_await tx.send(i);
      if (!sent) {
        co_return;
      }
    }
  };
  auto receive_forever = [](corio::receiver<std::uint64_t> rx, corio::test::counted,
                            std::atomic<std::uint64_t>* count) -> corio::task<void> {
    for (;;) {
      std::optional<std::uint64_t> value = co_await rx.recv();
      if (!value) {
        co_return;
      }
      count->fetch_add(1, std::memory_order_relaxed);
    }
  };
  {
    corio::runtime rt(workers(1));
    for (int i = 0; i < 4; ++i) {
      auto [tx, rx] = corio::channel<std::uint64_t>(64);
      rt.spawn(corio::shield(receive_forever(std::move(rx), corio::test::counted(counts), &received))).detach();
      rt.spawn(corio::shield(send_forever(std::move(tx), corio::test::counted(counts)))).detach();
    }
    while (received.load() < 100'000) {
      std::this_thread::yield();
    }
  }
  EXPECT_EQ(counts.alive.load(), 0);
}

}  // namespace
