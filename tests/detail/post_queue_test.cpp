#include <corio/detail/parker.hpp>
#include <corio/detail/post_queue.hpp>

#include <gtest/gtest.h>

#include <memory>

#include <array>
#include <thread>
#include <vector>

namespace {

TEST(post_queue, drain_respects_the_budget) {
  auto parker = std::make_shared<corio::detail::parker>();
  corio::detail::post_queue queue(parker);
  int ran = 0;
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(queue.push([&] { ++ran; }));
  }
  EXPECT_TRUE(queue.has_pending());
  EXPECT_EQ(queue.drain(4), 4u);
  EXPECT_EQ(ran, 4);
  EXPECT_EQ(queue.drain(100), 6u);
  EXPECT_FALSE(queue.has_pending());
}

TEST(post_queue, reuses_segments_in_steady_state) {
  auto parker = std::make_shared<corio::detail::parker>();
  corio::detail::post_queue queue(parker);
  long sum = 0;
  for (int round = 0; round < 100; ++round) {
    for (int i = 0; i < 300; ++i) {
      queue.push([&sum, i] { sum += i; });
    }
    queue.drain(1000);
  }
  EXPECT_EQ(sum, 100L * (300L * 299L / 2));
}

// Records of 16 to 72 bytes make segments end at every possible offset, so the end-of-segment marker
// and the exact-fit case are both crossed many times.
TEST(post_queue, mixed_size_records_keep_fifo_order_across_segments) {
  auto parker = std::make_shared<corio::detail::parker>();
  corio::detail::post_queue queue(parker);
  std::vector<int> seen;
  int next = 0;
  for (int round = 0; round < 3000; ++round) {
    switch (round % 4) {
      case 0:
        queue.push([&seen, id = next++] { seen.push_back(id); });
        break;
      case 1: {
        std::array<char, 24> pad{};
        queue.push([&seen, id = next++, pad] { seen.push_back(id + pad[0]); });
        break;
      }
      case 2: {
        std::array<char, 48> pad{};
        queue.push([&seen, id = next++, pad] { seen.push_back(id + pad[0]); });
        break;
      }
      default: {
        std::array<char, 200> pad{};  // boxed
        queue.push([&seen, id = next++, pad] { seen.push_back(id + pad[0]); });
        break;
      }
    }
    if (round % 700 == 0) {
      queue.drain(300);  // consume part-way, so producer and consumer sit in different segments
    }
  }
  while (queue.drain(1000) != 0) {
  }
  ASSERT_EQ(seen.size(), 3000u);
  for (int i = 0; i < 3000; ++i) {
    ASSERT_EQ(seen[static_cast<std::size_t>(i)], i);
  }
}

TEST(post_queue, closed_queue_refuses_pushes) {
  auto parker = std::make_shared<corio::detail::parker>();
  corio::detail::post_queue queue(parker);
  queue.close();
  EXPECT_FALSE(queue.push([] {}));
  EXPECT_FALSE(queue.has_pending());
}

TEST(post_queue, one_thread_can_feed_several_queues) {
  auto parker_a = std::make_shared<corio::detail::parker>();
  auto parker_b = std::make_shared<corio::detail::parker>();
  corio::detail::post_queue a(parker_a);
  corio::detail::post_queue b(parker_b);
  std::vector<char> order;
  for (int i = 0; i < 3; ++i) {
    a.push([&] { order.push_back('a'); });
    b.push([&] { order.push_back('b'); });
  }
  a.drain(10);
  b.drain(10);
  EXPECT_EQ(order, (std::vector<char>{'a', 'a', 'a', 'b', 'b', 'b'}));
}

}  // namespace
