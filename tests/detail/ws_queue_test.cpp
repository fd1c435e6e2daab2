// The worker's local run queue: push_batch against push, pop, pop_unshared and a concurrent thief.
#include <corio/detail/ws_queue.hpp>

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace {

using small_queue = corio::detail::ws_queue<4>;

void* as_item(std::uintptr_t value) { return reinterpret_cast<void*>(value); }

std::vector<std::uintptr_t> pop_all(small_queue& queue) {
  std::vector<std::uintptr_t> out;
  while (void* item = queue.pop()) {
    out.push_back(reinterpret_cast<std::uintptr_t>(item));
  }
  return out;
}

const auto identity = [](void* item) { return item; };

TEST(ws_queue, a_batch_fills_the_free_room_in_order_and_reports_what_it_left) {
  small_queue queue;
  ASSERT_TRUE(queue.push(as_item(1)));
  std::array<void*, 5> batch{as_item(2), as_item(3), as_item(4), as_item(5), as_item(6)};
  EXPECT_EQ(queue.push_batch(batch.data(), batch.size(), identity), 3u);  // room for 3 of 5
  EXPECT_EQ(queue.size(), 4u);
  EXPECT_EQ(queue.push_batch(batch.data(), batch.size(), identity), 0u);  // full
  EXPECT_EQ(pop_all(queue), (std::vector<std::uintptr_t>{1, 2, 3, 4}));
}

TEST(ws_queue, batches_wrap_around_the_slots) {
  small_queue queue;
  std::vector<std::uintptr_t> popped;
  std::uintptr_t next = 1;
  for (int round = 0; round < 10; ++round) {  // 3 per round: the tail crosses the slot array's end
    std::array<void*, 3> batch{as_item(next), as_item(next + 1), as_item(next + 2)};
    ASSERT_EQ(queue.push_batch(batch.data(), batch.size(), identity), 3u);
    next += 3;
    for (std::uintptr_t value : pop_all(queue)) {
      popped.push_back(value);
    }
  }
  ASSERT_EQ(popped.size(), 30u);
  for (std::size_t i = 0; i < popped.size(); ++i) {
    EXPECT_EQ(popped[i], i + 1);
  }
}

// A queue nobody steals from (a one-worker runtime): the plain-store pop keeps FIFO order across the
// slots' end, frees room for push(), and size() sees each pop.
TEST(ws_queue, an_unshared_pop_keeps_order_and_frees_room) {
  small_queue queue;
  std::uintptr_t next = 1;
  std::uintptr_t expected = 1;
  for (int round = 0; round < 10; ++round) {
    while (queue.push(as_item(next))) {
      ++next;
    }
    EXPECT_EQ(queue.size(), 4u);
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(queue.pop_unshared()), expected++);
    }
    EXPECT_EQ(queue.size(), 1u);
  }
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(queue.pop_unshared()), expected++);
  EXPECT_EQ(queue.pop_unshared(), nullptr);
  EXPECT_EQ(expected, next);
}

// The owner publishes batches while a thief steals: every item is taken exactly once, by one side,
// and a thief never reads a slot before the batch that wrote it was published (ThreadSanitizer).
TEST(ws_queue, a_thief_racing_batches_takes_each_item_once) {
  corio::detail::ws_queue<64> queue;
  constexpr std::uintptr_t items = 200'000;
  std::atomic<bool> done{false};
  std::atomic<bool> thief_took{false};
  std::vector<std::uint8_t> seen(items + 1, 0);
  std::vector<std::uintptr_t> stolen;
  std::thread thief([&] {
    void* out[64 / 2 + 1];
    while (!done.load(std::memory_order_acquire)) {
      std::size_t count = queue.steal_half(out);
      for (std::size_t i = 0; i < count; ++i) {
        stolen.push_back(reinterpret_cast<std::uintptr_t>(out[i]));
      }
      if (count != 0) {
        thief_took.store(true, std::memory_order_relaxed);
      }
    }
  });
  std::uintptr_t next = 1;
  std::vector<std::uintptr_t> owned;
  while (next <= items) {
    std::array<void*, 7> batch;
    std::size_t count = 0;
    for (; count < batch.size() && next + count <= items; ++count) {
      batch[count] = as_item(next + count);
    }
    next += queue.push_batch(batch.data(), count, identity);
    if (!thief_took.load(std::memory_order_relaxed)) {
      std::this_thread::yield();  // until the thief has taken something, the queue fills and waits for it
    } else if (void* item = queue.pop()) {  // then the owner takes its share too
      owned.push_back(reinterpret_cast<std::uintptr_t>(item));
    }
  }
  while (void* item = queue.pop()) {
    owned.push_back(reinterpret_cast<std::uintptr_t>(item));
  }
  done.store(true, std::memory_order_release);
  thief.join();
  for (std::uintptr_t value : owned) {
    ++seen[value];
  }
  for (std::uintptr_t value : stolen) {
    ++seen[value];
  }
  for (std::uintptr_t value = 1; value <= items; ++value) {
    ASSERT_EQ(seen[value], 1) << "item " << value;
  }
}

}  // namespace
