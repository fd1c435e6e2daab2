#pragma once
// The timed run of the `post` scenario (bench/scenarios.md), written once for every queue adapter.
//
// An adapter offers three calls, the same shape evpp's EventLoop gives QueueInLoop:
//   post(f)   any producer thread: hand functor f to the consumer
//   run()     the consumer thread: run posted functors until stop() is called
//   stop()    the consumer thread only (the last functor calls it): make run() return
//
// Threads: main starts the consumer, then P producers; producers spin on `go` (release by main,
// acquire by producers), so the clock starts before any post. Everything in `consumer_state` is
// touched only by the consumer thread, and read by main after joining it.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "../common/check.hpp"
#include "../common/clock.hpp"

namespace lab {

/// What the functors check and count. Consumer thread only.
template <class Queue>
struct consumer_state {
  Queue* queue = nullptr;
  std::uint64_t total = 0;
  std::uint64_t ran = 0;
  bool out_of_order = false;
  std::vector<std::uint32_t> next_sequence;
  clock::time_point finished_at{};

  void on_functor(std::uint32_t producer, std::uint32_t sequence) {
    if (next_sequence[producer] != sequence) out_of_order = true;
    next_sequence[producer] = sequence + 1;
    if (++ran == total) {
      finished_at = clock::now();
      queue->stop();
    }
  }
};

/// Posts `count` functors from producer `index`, in sequence order.
template <class Queue>
void produce(Queue& queue, consumer_state<Queue>* state, std::uint32_t index, std::uint32_t count) {
  for (std::uint32_t sequence = 0; sequence < count; ++sequence) {
    auto functor = [state, index, sequence] { state->on_functor(index, sequence); };
    static_assert(sizeof(functor) <= 16, "the payload must fit std::function's inline buffer");
    queue.post(functor);
  }
}

/// How long the consumer may take to run everything before the run fails (a lost functor would
/// otherwise hang it forever).
inline constexpr std::chrono::seconds consumer_deadline{120};

/// Runs one cell and returns its elapsed seconds, after the self-check.
template <class Queue>
double run_post_cell(std::uint32_t producers, std::uint32_t per_producer) {
  Queue queue;
  consumer_state<Queue> state;
  state.queue = &queue;
  state.total = std::uint64_t{producers} * per_producer;
  state.next_sequence.assign(producers, 0);

  std::promise<void> consumer_done;
  std::future<void> consumer_finished = consumer_done.get_future();
  std::thread consumer([&queue, &consumer_done] {
    queue.run();
    consumer_done.set_value();
  });
  std::atomic<std::uint32_t> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (std::uint32_t index = 0; index < producers; ++index) {
    threads.emplace_back([&, index] {
      ready.fetch_add(1, std::memory_order_relaxed);
      while (!go.load(std::memory_order_acquire)) {
      }
      produce(queue, &state, index, per_producer);
    });
  }
  while (ready.load(std::memory_order_relaxed) != producers) {
  }
  const auto start = clock::now();
  go.store(true, std::memory_order_release);
  for (auto& thread : threads) thread.join();
  expect(consumer_finished.wait_for(consumer_deadline) == std::future_status::ready,
         "the consumer did not run every functor within the deadline (a functor was lost)");
  consumer.join();

  expect(state.ran == state.total,
         "ran " + std::to_string(state.ran) + " functors, expected " + std::to_string(state.total));
  expect(!state.out_of_order, "a functor ran out of its producer's order, or twice");
  for (std::uint32_t next : state.next_sequence) expect(next == per_producer, "a producer's functors did not all run");
  return elapsed_ns(start, state.finished_at) / 1e9;
}

}  // namespace lab
