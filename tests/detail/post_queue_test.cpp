#include <corio/detail/parker.hpp>
#include <corio/detail/post_queue.hpp>

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace {

TEST(post_queue, drain_respects_the_budget) {
  corio::detail::parker parker;
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
  corio::detail::parker parker;
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

TEST(post_queue, closed_queue_refuses_pushes) {
  corio::detail::parker parker;
  corio::detail::post_queue queue(parker);
  queue.close();
  EXPECT_FALSE(queue.push([] {}));
  EXPECT_FALSE(queue.has_pending());
}

TEST(post_queue, one_thread_can_feed_several_queues) {
  corio::detail::parker parker_a;
  corio::detail::parker parker_b;
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
