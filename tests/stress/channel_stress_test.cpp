// Stress: channels with producers and consumers on runtime workers, event loops and plain threads,
// with close and cancellation racing in-flight operations. Bounded in count (and so in time). Each
// test checks an exact outcome: every delivered message received exactly once (and, without
// cancellation, in each producer's order), counts of live values back to zero. A lost wake-up leaves
// a task parked forever and the test hits its ctest timeout; TSan checks the rest.
#include <corio/broadcast.hpp>
#include <corio/channel.hpp>
#include <corio/event_loop.hpp>
#include <corio/join_handle.hpp>
#include <corio/runtime.hpp>
#include <corio/select.hpp>
#include <corio/sync_wait.hpp>
#include <corio/task.hpp>
#include <corio/time.hpp>
#include <corio/wait_group.hpp>
#include <corio/yield.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "support/lifetime.hpp"
#include "support/loops.hpp"

namespace {

using corio::test::counted;
using corio::test::lifetime_counts;
using corio::test::loop_thread;

constexpr std::size_t unbounded = SIZE_MAX;

std::pair<corio::sender<long>, corio::receiver<long>> make_channel(std::size_t capacity) {
  return capacity == unbounded ? corio::unbounded_channel<long>() : corio::channel<long>(capacity);
}

// How often each message id was received, and whether any consumer saw a producer's messages out of
// order. Message id = producer * per_producer + sequence number.
struct delivery_log {
  explicit delivery_log(std::size_t ids) : seen(ids) {}
  std::vector<std::atomic<int>> seen;
  std::atomic<int> out_of_order{0};

  // Each consumer keeps its own last sequence number per producer.
  struct consumer_view {
    explicit consumer_view(int producers) : last(static_cast<std::size_t>(producers), -1) {}
    std::vector<long> last;
  };
  void record(consumer_view& view, long id, long per_producer) {
    seen[static_cast<std::size_t>(id)].fetch_add(1, std::memory_order_relaxed);
    auto producer = static_cast<std::size_t>(id / per_producer);
    long sequence = id % per_producer;
    if (sequence <= view.last[producer]) {
      out_of_order.fetch_add(1, std::memory_order_relaxed);
    }
    view.last[producer] = sequence;
  }
  int count_not_exactly_once() const {
    int bad = 0;
    for (const auto& n : seen) {
      bad += n.load() != 1 ? 1 : 0;
    }
    return bad;
  }
};

corio::task<void> produce(corio::sender<long> tx, int producer, long per_producer) {
  for (long i = 0; i < per_producer; ++i) {
    EXPECT_TRUE(co_await tx.send(producer * per_producer + i));
  }
}

corio::task<void> consume(corio::receiver<long> rx, delivery_log& log, int producers, long per_producer) {
  delivery_log::consumer_view view(producers);
  while (std::optional<long> id = co_await rx.recv()) {
    log.record(view, *id, per_producer);
  }
}

class channel_kinds : public ::testing::TestWithParam<std::size_t> {};

TEST_P(channel_kinds, producers_and_consumers_on_a_runtime_exchange_every_message_once_in_order) {
  constexpr int producers = 4;
  constexpr int consumers = 3;
  constexpr long per_producer = 2000;
  delivery_log log(producers * per_producer);
  {
    auto [tx, rx] = make_channel(GetParam());
    corio::runtime rt(corio::runtime::options{.workers = 2});
    std::vector<corio::join_handle<void>> tasks;
    for (int c = 0; c < consumers; ++c) {
      tasks.push_back(rt.spawn(consume(rx, log, producers, per_producer)));
    }
    for (int p = 0; p < producers; ++p) {
      tasks.push_back(rt.spawn(produce(tx, p, per_producer)));
    }
    { auto last = std::move(tx); }  // the producers' copies are the only senders left
    { auto last = std::move(rx); }
    for (auto& task : tasks) {
      corio::sync_wait(std::move(task));
    }
  }
  EXPECT_EQ(log.count_not_exactly_once(), 0);
  EXPECT_EQ(log.out_of_order.load(), 0);
}

TEST_P(channel_kinds, a_loop_a_runtime_and_plain_threads_share_one_channel) {
  constexpr int producers = 3;  // one on a loop, one on the runtime, one plain thread
  constexpr long per_producer = 1500;
  delivery_log log(producers * per_producer);
  {
    auto [tx, rx] = make_channel(GetParam());
    corio::wait_group loop_done;
    loop_done.add(2);
    loop_thread loop;
    corio::runtime rt(corio::runtime::options{.workers = 2});
    loop.spawn([](corio::receiver<long> rx, delivery_log& log, corio::wait_group& done) -> corio::task<void> {
      co_await consume(std::move(rx), log, producers, per_producer);
      done.done();
    }(rx, log, loop_done));
    loop.spawn([](corio::sender<long> tx, corio::wait_group& done) -> corio::task<void> {
      co_await produce(std::move(tx), 0, per_producer);
      done.done();
    }(tx, loop_done));
    auto runtime_consumer = rt.spawn(consume(rx, log, producers, per_producer));
    auto runtime_producer = rt.spawn(produce(tx, 1, per_producer));
    std::thread thread_consumer([rx = rx, &log]() mutable {
      delivery_log::consumer_view view(producers);
      while (std::optional<long> id = rx.recv_blocking()) {
        log.record(view, *id, per_producer);
      }
    });
    std::thread thread_producer([tx = tx]() mutable {
      for (long i = 0; i < per_producer; ++i) {
        EXPECT_TRUE(tx.send_blocking(2 * per_producer + i));
      }
    });
    { auto last = std::move(tx); }
    { auto last = std::move(rx); }
    thread_producer.join();
    corio::sync_wait(std::move(runtime_producer));
    corio::sync_wait(std::move(runtime_consumer));
    corio::sync_wait(loop_done.wait());
    thread_consumer.join();
  }
  EXPECT_EQ(log.count_not_exactly_once(), 0);
  EXPECT_EQ(log.out_of_order.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(capacities, channel_kinds, ::testing::Values(std::size_t{0}, std::size_t{1}, std::size_t{16}, unbounded),
                         [](const ::testing::TestParamInfo<std::size_t>& info) {
                           return info.param == unbounded ? std::string("unbounded")
                                                          : "capacity_" + std::to_string(info.param);
                         });

TEST(channel_stress, close_racing_in_flight_sends_loses_nothing) {
  constexpr int rounds = 30;
  constexpr int producers = 4;
  constexpr int consumers = 2;
  constexpr long per_producer = 100'000;  // never reached: the close comes first
  corio::runtime rt(corio::runtime::options{.workers = 2});
  std::minstd_rand random(23);
  for (int round = 0; round < rounds; ++round) {
    auto [tx, rx] = corio::channel<long>(round % 3);  // rendezvous, 1, 2
    std::atomic<long> delivered{0};
    std::atomic<long> received{0};
    delivery_log log(producers * per_producer);
    std::vector<corio::join_handle<void>> tasks;
    for (int p = 0; p < producers; ++p) {
      tasks.push_back(rt.spawn([](corio::sender<long> tx, int p, std::atomic<long>& delivered) -> corio::task<void> {
        for (long i = 0; i < per_producer; ++i) {
          long id = p * per_producer + i;
          long kept = id;
          if (!co_await tx.send(std::move(kept))) {
            EXPECT_EQ(kept, id);  // handed back untouched
            break;
          }
          delivered.fetch_add(1);
        }
      }(tx, p, delivered)));
    }
    for (int c = 0; c < consumers; ++c) {
      tasks.push_back(rt.spawn([](corio::receiver<long> rx, delivery_log& log, std::atomic<long>& received) -> corio::task<void> {
        delivery_log::consumer_view view(producers);
        while (std::optional<long> id = co_await rx.recv()) {
          log.record(view, *id, per_producer);
          received.fetch_add(1);
        }
      }(rx, log, received)));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(random() % 2000));
    tx.close();
    for (auto& task : tasks) {
      corio::sync_wait(std::move(task));
    }
    EXPECT_EQ(received.load(), delivered.load());
    int duplicates = 0;
    for (const auto& n : log.seen) {
      duplicates += n.load() > 1 ? 1 : 0;
    }
    EXPECT_EQ(duplicates, 0);
    EXPECT_EQ(log.out_of_order.load(), 0);
  }
}

TEST(channel_stress, cancelling_blocked_senders_and_receivers_loses_and_duplicates_nothing) {
  constexpr int rounds = 12;
  constexpr int producers = 4;
  constexpr int consumers = 4;
  constexpr long per_producer = 1500;
  corio::runtime rt(corio::runtime::options{.workers = 2});
  std::minstd_rand random(41);
  for (int round = 0; round < rounds; ++round) {
    auto [tx, rx] = corio::channel<long>(round % 2);  // rendezvous or 1: most operations block
    delivery_log log(producers * per_producer);
    std::mutex delivered_mutex;
    std::vector<long> delivered;
    std::vector<corio::join_handle<void>> producer_tasks;
    std::vector<corio::join_handle<void>> consumer_tasks;
    for (int p = 0; p < producers; ++p) {
      producer_tasks.push_back(rt.spawn([](corio::sender<long> tx, int p, std::mutex& m, std::vector<long>& delivered) -> corio::task<void> {
        for (long i = 0; i < per_producer; ++i) {
          long id = p * per_producer + i;
          long value = id;
          bool ok = false;
          try {
            ok = co_await tx.send(std::move(value));
          } catch (const corio::cancelled&) {
            EXPECT_EQ(value, id);  // a cancelled send keeps its value
            throw;
          }
          if (ok) {
            std::lock_guard guard(m);
            delivered.push_back(id);
          }
        }
      }(tx, p, delivered_mutex, delivered)));
    }
    for (int c = 0; c < consumers; ++c) {
      consumer_tasks.push_back(rt.spawn([](corio::receiver<long> rx, delivery_log& log) -> corio::task<void> {
        delivery_log::consumer_view view(producers);
        while (std::optional<long> id = co_await rx.recv()) {
          log.seen[static_cast<std::size_t>(*id)].fetch_add(1, std::memory_order_relaxed);
        }
      }(rx, log)));
    }
    // Cancel one producer and two consumers at random moments, from this plain thread.
    std::this_thread::sleep_for(std::chrono::microseconds(random() % 1500));
    producer_tasks[0].cancel();
    std::this_thread::sleep_for(std::chrono::microseconds(random() % 500));
    consumer_tasks[0].cancel();
    std::this_thread::sleep_for(std::chrono::microseconds(random() % 500));
    consumer_tasks[1].cancel();
    for (auto& task : producer_tasks) {
      try {
        corio::sync_wait(std::move(task));
      } catch (const corio::cancelled&) {
      }
    }
    { auto last = std::move(tx); }  // every producer is done: close, let the consumers drain
    for (auto& task : consumer_tasks) {
      try {
        corio::sync_wait(std::move(task));
      } catch (const corio::cancelled&) {
      }
    }
    while (auto left = rx.try_recv()) {  // values given back after the last consumer stopped
      log.seen[static_cast<std::size_t>(*left.value)].fetch_add(1);
    }
    int lost = 0;
    for (long id : delivered) {
      lost += log.seen[static_cast<std::size_t>(id)].exchange(0) != 1 ? 1 : 0;
    }
    int phantom = 0;  // received but never reported delivered, or received twice
    for (const auto& n : log.seen) {
      phantom += n.load() != 0 ? 1 : 0;
    }
    EXPECT_EQ(lost, 0) << "round " << round;
    EXPECT_EQ(phantom, 0) << "round " << round;
  }
}

TEST(channel_stress, runtime_shutdown_with_tasks_blocked_on_channels_destroys_every_value_once) {
  constexpr int rounds = 10;
  constexpr int tasks_each = 6;
  for (int round = 0; round < rounds; ++round) {
    lifetime_counts counts;
    std::atomic<int> delivered{0};
    std::atomic<int> received{0};
    {
      auto [rendezvous_tx, rendezvous_rx] = corio::channel<counted>(0);
      auto [bounded_tx, bounded_rx] = corio::channel<counted>(2);
      {
        corio::runtime rt(corio::runtime::options{.workers = 2});
        auto sender_task = [](corio::sender<counted> tx, lifetime_counts& counts, std::atomic<int>& delivered) -> corio::task<void> {
          for (int i = 0;; ++i) {
            if (co_await tx.send(counted(counts, i))) {
              delivered.fetch_add(1);
            }
          }
        };
        auto receiver_task = [](corio::receiver<counted> rx, std::atomic<int>& received) -> corio::task<void> {
          for (;;) {
            if (auto value = co_await rx.recv()) {
              received.fetch_add(1);
            }
          }
        };
        for (int i = 0; i < tasks_each; ++i) {
          rt.spawn(sender_task(rendezvous_tx, counts, delivered)).detach();
          rt.spawn(sender_task(bounded_tx, counts, delivered)).detach();
          if (i % 2 == 0) {  // fewer receivers than senders: some senders stay blocked
            rt.spawn(receiver_task(rendezvous_rx, received)).detach();
            rt.spawn(receiver_task(bounded_rx, received)).detach();
          }
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200 * (round % 4)));
      }  // shutdown: tasks cancelled mid-send, mid-recv, or holding a value handed to them
      int left = 0;
      while (rendezvous_rx.try_recv()) {
        ++left;
      }
      while (bounded_rx.try_recv()) {
        ++left;
      }
      // A sender destroyed after its value was taken but before it resumed never counted it.
      EXPECT_LE(delivered.load(), received.load() + left) << "round " << round;
    }
    EXPECT_EQ(counts.alive.load(), 0) << "round " << round;
  }
}

// Two channels; senders that each offer one value to both at once (select of two sends), receivers
// that select over both with a racing timeout, single-channel receivers, and a select receiver
// cancelled mid-way. A losing branch that consumed a message or took a slot would show up as a value
// received twice, received but never reported delivered, or a sender's kept value changed.
TEST(channel_stress, select_never_consumes_from_a_losing_branch) {
  using namespace std::chrono_literals;
  constexpr int rounds = 8;
  constexpr int senders = 2;
  constexpr long per_sender = 1500;
  constexpr long id_space = 2 * senders * per_sender;  // ids: sender, channel, sequence
  corio::runtime rt(corio::runtime::options{.workers = 2});
  std::minstd_rand random(7);
  for (int round = 0; round < rounds; ++round) {
    auto [a_tx, a_rx] = corio::channel<long>(round % 2);
    auto [b_tx, b_rx] = corio::channel<long>((round / 2) % 2);
    std::vector<std::atomic<int>> delivered(id_space);
    std::vector<std::atomic<int>> received(id_space);
    std::atomic<int> changed_losers{0};
    std::atomic<long> timeouts{0};
    std::vector<corio::join_handle<void>> tasks;
    for (int p = 0; p < senders; ++p) {
      tasks.push_back(rt.spawn([](corio::sender<long> a, corio::sender<long> b, long p, std::vector<std::atomic<int>>& delivered,
                                  std::atomic<int>& changed) -> corio::task<void> {
        long next[2] = {0, 0};
        while (next[0] + next[1] < per_sender) {
          long ids[2] = {(p * 2 + 0) * per_sender + next[0], (p * 2 + 1) * per_sender + next[1]};
          long values[2] = {ids[0], ids[1]};
          auto r = co_await corio::select(a.send(std::move(values[0])), b.send(std::move(values[1])));
          std::size_t won = r.index();
          EXPECT_TRUE(won == 0 ? bool(std::get<0>(r)) : bool(std::get<1>(r)));
          delivered[static_cast<std::size_t>(ids[won])].fetch_add(1);
          if (values[1 - won] != ids[1 - won]) {
            changed.fetch_add(1);
          }
          ++next[won];
        }
      }(a_tx, b_tx, p, delivered, changed_losers)));
    }
    auto select_receiver = [](corio::receiver<long> a, corio::receiver<long> b, std::vector<std::atomic<int>>& received,
                              std::atomic<long>& timeouts) -> corio::task<void> {
      bool closed[2] = {false, false};
      while (!closed[0] || !closed[1]) {
        auto r = co_await corio::select(a.recv(), b.recv(), corio::after(50us));
        if (r.index() == 2) {
          timeouts.fetch_add(1, std::memory_order_relaxed);
          continue;
        }
        const std::optional<long>& id = r.index() == 0 ? std::get<0>(r) : std::get<1>(r);
        if (id) {
          received[static_cast<std::size_t>(*id)].fetch_add(1);
        } else {
          closed[r.index()] = true;
        }
      }
    };
    auto plain_receiver = [](corio::receiver<long> rx, std::vector<std::atomic<int>>& received) -> corio::task<void> {
      while (std::optional<long> id = co_await rx.recv()) {
        received[static_cast<std::size_t>(*id)].fetch_add(1);
      }
    };
    auto doomed = rt.spawn(select_receiver(a_rx, b_rx, received, timeouts));
    tasks.push_back(rt.spawn(select_receiver(a_rx, b_rx, received, timeouts)));
    tasks.push_back(rt.spawn(select_receiver(a_rx, b_rx, received, timeouts)));
    tasks.push_back(rt.spawn(plain_receiver(a_rx, received)));
    tasks.push_back(rt.spawn(plain_receiver(b_rx, received)));
    { auto last = std::move(a_tx); }
    { auto last = std::move(b_tx); }
    std::this_thread::sleep_for(std::chrono::microseconds(random() % 1000));
    doomed.cancel();
    for (auto& task : tasks) {
      corio::sync_wait(std::move(task));
    }
    try {
      corio::sync_wait(std::move(doomed));
    } catch (const corio::cancelled&) {
    }
    int mismatched = 0;
    for (std::size_t id = 0; id < delivered.size(); ++id) {
      mismatched += delivered[id].load() != received[id].load() || received[id].load() > 1 ? 1 : 0;
    }
    long total = 0;
    for (const auto& n : received) {
      total += n.load();
    }
    EXPECT_EQ(mismatched, 0) << "round " << round;
    EXPECT_EQ(total, long{senders} * per_sender) << "round " << round;
    EXPECT_EQ(changed_losers.load(), 0) << "round " << round;
  }
}

// A fast sender and receivers of different speeds on two workers: each receiver's values are
// consecutive except where it was told it lagged, and the gap is exactly the count it was told.
// A deadline racing a value's arrival on another worker: with_timeout either times out with nothing
// taken or returns the value; it never drops one (when_any alone would: it destroys a loser's result).
TEST(channel_stress, with_timeout_around_recv_never_loses_a_value) {
  corio::runtime rt(corio::runtime::options{.workers = 2, .max_blocking_threads = 2});
  constexpr long sends = 20'000;
  auto [tx, rx] = corio::channel<long>(4);
  auto receive = [](corio::receiver<long> in) -> corio::task<long> {
    long sum = 0;
    for (;;) {
      try {
        std::optional<long> value = co_await corio::with_timeout(std::chrono::microseconds(20), in.recv());
        if (!value) {
          co_return sum;
        }
        sum += *value;
      } catch (const corio::timed_out&) {
      }
    }
  };
  auto send = [](corio::sender<long> out) -> corio::task<void> {
    std::minstd_rand random(7);
    for (long i = 1; i <= sends; ++i) {
      EXPECT_TRUE(co_await out.send(long{i}));
      if (random() % 64 == 0) {
        co_await corio::sleep_for(std::chrono::microseconds(random() % 40));
      }
    }
  };
  auto received = rt.spawn(receive(std::move(rx)));
  rt.block_on(send(std::move(tx)));  // the last sender goes: the receiver drains, then sees nullopt
  EXPECT_EQ(corio::sync_wait(std::move(received)), sends * (sends + 1) / 2);
}

TEST(channel_stress, broadcast_lag_counts_are_exact) {
  constexpr int rounds = 10;
  constexpr long messages = 5000;
  constexpr int receivers = 3;
  corio::runtime rt(corio::runtime::options{.workers = 2});
  for (int round = 0; round < rounds; ++round) {
    auto [tx, rx] = corio::broadcast<long>(1 + round % 8);
    std::atomic<int> wrong{0};
    std::atomic<long> lagged_total{0};
    std::vector<corio::join_handle<void>> tasks;
    for (int r = 0; r < receivers; ++r) {
      tasks.push_back(rt.spawn([](corio::broadcast_receiver<long> rx, int slowness, std::atomic<int>& wrong,
                                  std::atomic<long>& lagged_total) -> corio::task<void> {
        long expected = 0;
        for (long n = 0;; ++n) {
          auto r = co_await rx.recv();
          if (auto* value = std::get_if<long>(&r)) {
            wrong.fetch_add(*value != expected ? 1 : 0);
            expected = *value + 1;
          } else if (auto* lag = std::get_if<corio::lagged>(&r)) {
            wrong.fetch_add(lag->missed == 0 ? 1 : 0);
            expected += static_cast<long>(lag->missed);
            lagged_total.fetch_add(static_cast<long>(lag->missed));
          } else {
            break;
          }
          if (slowness != 0 && n % slowness == 0) {
            co_await corio::yield();
          }
        }
        wrong.fetch_add(expected != messages ? 1 : 0);  // received + missed == sent
      }(r == 0 ? rx : tx.subscribe(), r, wrong, lagged_total)));
    }
    { auto moved = std::move(rx); }
    tasks.push_back(rt.spawn([](corio::broadcast_sender<long> tx) -> corio::task<void> {
      for (long i = 0; i < messages; ++i) {
        EXPECT_TRUE(tx.send(long{i}));
        if (i % 64 == 0) {
          co_await corio::yield();
        }
      }
    }(std::move(tx))));
    for (auto& task : tasks) {
      corio::sync_wait(std::move(task));
    }
    EXPECT_EQ(wrong.load(), 0) << "round " << round;
  }
}

}  // namespace
