// chan_floor: the `floor` row of the `chan` scenario (bench/scenarios.md). The same W*E events and
// the same per-event work as every other row, with no scheduler and no synchronisation: W plain
// single-thread ring buffers of capacity Q, which one loop fills and drains in turn (sender i's next
// batch of up to Q events into ring i, then receiver i's take of them), ring after ring. What is left
// is the cost of the work itself: making, moving and destroying the events, the shared counter and the
// exit-marker check. Prints one CSV row (see scenario.hpp); task_bytes is 0, there are no tasks.
//
// Usage: chan_floor -w W -e E [-q Q] [-t int|str|str_ptr|str_clone] [-s S]

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "../common/check.hpp"
#include "../common/clock.hpp"
#include "../common/rss.hpp"
#include "scenario.hpp"

namespace {

using lab::chan::event;

/// A fixed-capacity FIFO ring, one thread only. Slots are constructed once, up front, and events are
/// moved in and out of them, as a channel's buffer does.
class ring {
 public:
  explicit ring(std::size_t capacity) : slots_(capacity) {}

  bool empty() const noexcept { return size_ == 0; }

  void push(event&& value) noexcept {
    slots_[tail_] = std::move(value);
    tail_ = next(tail_);
    ++size_;
  }

  event pop() noexcept {
    event value = std::move(slots_[head_]);
    head_ = next(head_);
    --size_;
    return value;
  }

 private:
  std::size_t next(std::size_t index) const noexcept { return index + 1 == slots_.size() ? 0 : index + 1; }

  std::vector<event> slots_;
  std::size_t head_ = 0;
  std::size_t tail_ = 0;
  std::size_t size_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  const lab::chan::params p = lab::chan::parse(argc, argv);
  lab::expect(p.threads == 0, "the floor has no runtime: --threads does not apply");
  const lab::chan::event_source source(p.type, p.string_size);
  std::atomic<std::uint64_t> counter{0};

  std::vector<ring> rings;
  rings.reserve(p.workers);
  const std::int64_t before = lab::anonymous_resident_bytes();
  for (std::uint64_t i = 0; i < p.workers; ++i) rings.emplace_back(p.capacity);
  const std::int64_t with_rings = lab::anonymous_resident_bytes();

  // Every ring moves the same sequence numbers, so one `sent` position serves all of them. A batch is at
  // most Q events and each ring is empty when its batch starts, so a push never finds the ring full.
  bool marker_seen = false;
  const auto start = lab::clock::now();
  for (std::uint64_t sent = 0; sent < p.events && !marker_seen;) {
    const std::uint64_t batch_end = sent + std::min<std::uint64_t>(p.capacity, p.events - sent);
    for (ring& r : rings) {
      for (std::uint64_t sequence = sent; sequence < batch_end; ++sequence) r.push(source.make(sequence));
      while (!r.empty()) marker_seen |= !lab::chan::consume(r.pop(), counter);
    }
    sent = batch_end;
  }
  const double seconds = lab::elapsed_ns(start, lab::clock::now()) / 1e9;

  lab::chan::report("floor", p, seconds, counter.load(std::memory_order_relaxed),
                    {lab::chan::per_item(before, with_rings, p.workers), 0});
  return 0;
}
