// chan_corio: the `corio` and `corio-1t` rows of the `chan` scenario (bench/scenarios.md), on
// corio::runtime with corio::channel. Prints one CSV row (see scenario.hpp).
//
// Usage: chan_corio -w W -e E [-q Q] [-t int|str|str_ptr|str_clone] [-s S] [--threads T]
// --threads 0 (the default) runs one worker per core (`corio`); --threads 1 one worker (`corio-1t`).
//
// bench/cpp/CMakeLists.txt builds this file only when the installed corio has corio/channel.hpp; the
// floor row (floor.cpp) does not depend on it.
//
// Threads: the body, the receivers and the senders may run on any worker. They share `shared_state`
// (two relaxed atomics: the scenario's counter, and the count of receivers that reached their first
// recv, which only gates the start of the clock) and the immutable event_source. The body joins every
// task before it returns, so both outlive every task that uses them.

#include <corio/channel.hpp>
#include <corio/join_handle.hpp>
#include <corio/runtime.hpp>
#include <corio/task.hpp>
#include <corio/yield.hpp>

#include <atomic>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "../common/clock.hpp"
#include "../common/rss.hpp"
#include "scenario.hpp"

namespace {

using lab::chan::event;

// On lines of its own: the counter is written by every event, and main() keeps the read-only
// event_source right next to it on its stack, so every sender's make() missed on a line the other
// worker's receivers kept taking away (perf, 2 workers: 40% of the sender's samples on that load).
struct alignas(128) shared_state {
  std::atomic<std::uint64_t> counter{0};
  std::atomic<std::uint64_t> waiting{0};  // receivers that reached their first recv
};

struct outcome {
  double seconds = 0;
  lab::chan::memory memory;
};

/// Receiver i: takes exactly E events from its own channel, counting and checking each one.
corio::task<void> receive(corio::receiver<event> rx, std::uint64_t events, shared_state& shared) {
  shared.waiting.fetch_add(1, std::memory_order_relaxed);
  for (std::uint64_t i = 0; i < events; ++i) {
    std::optional<event> received = co_await rx.recv();
    if (!received || !lab::chan::consume(*received, shared.counter)) co_return;
  }
}

/// Sender i: sends E events into channel i; stops early only if the channel's receiver is gone.
corio::task<void> send(corio::sender<event> tx, std::uint64_t events, const lab::chan::event_source& source) {
  for (std::uint64_t i = 0; i < events; ++i) {
    if (!co_await tx.send(source.make(i))) co_return;
  }
}

/// The scenario, run as one task on the runtime (block_on spawns it onto a worker).
corio::task<outcome> body(const lab::chan::params& p, const lab::chan::event_source& source, shared_state& shared) {
  std::vector<corio::sender<event>> senders;
  std::vector<corio::receiver<event>> receivers;
  std::vector<corio::join_handle<void>> receiving;
  std::vector<corio::join_handle<void>> sending;
  senders.reserve(p.workers);
  receivers.reserve(p.workers);
  receiving.reserve(p.workers);
  sending.reserve(p.workers);

  const std::int64_t before = lab::anonymous_resident_bytes();
  for (std::uint64_t i = 0; i < p.workers; ++i) {
    auto [tx, rx] = corio::channel<event>(p.capacity);
    senders.push_back(std::move(tx));
    receivers.push_back(std::move(rx));
  }
  const std::int64_t with_channels = lab::anonymous_resident_bytes();
  for (auto& rx : receivers) receiving.push_back(corio::spawn(receive(std::move(rx), p.events, shared)));
  while (shared.waiting.load(std::memory_order_relaxed) < p.workers) co_await corio::yield();
  const std::int64_t with_receivers = lab::anonymous_resident_bytes();

  const auto start = lab::clock::now();
  for (auto& tx : senders) sending.push_back(corio::spawn(send(std::move(tx), p.events, source)));
  for (auto& handle : receiving) co_await std::move(handle);
  const double seconds = lab::elapsed_ns(start, lab::clock::now()) / 1e9;

  for (auto& handle : sending) co_await std::move(handle);
  co_return outcome{seconds, {lab::chan::per_item(before, with_channels, p.workers),
                              lab::chan::per_item(with_channels, with_receivers, p.workers)}};
}

}  // namespace

int main(int argc, char** argv) {
  const lab::chan::params p = lab::chan::parse(argc, argv);
  const lab::chan::event_source source(p.type, p.string_size);
  shared_state shared;
  outcome result;
  {
    corio::runtime::options options;
    options.workers = p.threads;  // 0: one per online CPU
    corio::runtime rt(std::move(options));
    result = rt.block_on(body(p, source, shared));
  }
  lab::chan::report("corio", p, result.seconds, shared.counter.load(std::memory_order_relaxed), result.memory);
  return 0;
}
