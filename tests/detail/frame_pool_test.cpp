#include <corio/detail/frame_pool.hpp>
#include <corio/sync_wait.hpp>
#include <corio/task.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {

corio::task<int> small_task(int x) { co_return x * 2; }

TEST(frame_pool, steady_state_task_creation_does_not_allocate_fresh_frames) {
  // Warm up: the first frames of this size come from ::operator new.
  for (int i = 0; i < 100; ++i) {
    corio::sync_wait(small_task(i));
  }
  auto before = corio::detail::current_frame_pool_stats();
  long sum = 0;
  for (int i = 0; i < 10'000; ++i) {
    sum += corio::sync_wait(small_task(i));
  }
  auto after = corio::detail::current_frame_pool_stats();
  EXPECT_EQ(sum, 2L * (10'000L * 9'999L / 2));
  EXPECT_EQ(after.fresh_allocations, before.fresh_allocations);
  EXPECT_GE(after.pooled_allocations - before.pooled_allocations, 10'000u);
}

TEST(frame_pool, freed_frame_is_handed_out_again) {
  void* first = corio::detail::allocate_frame(200);
  corio::detail::deallocate_frame(first, 200);
  void* second = corio::detail::allocate_frame(205);  // same 208-byte class (16-byte granules)
  EXPECT_EQ(first, second);
  corio::detail::deallocate_frame(second, 205);
}

TEST(frame_pool, many_live_frames_are_all_reused_after_release) {
  std::vector<corio::task<int>> live;
  for (int i = 0; i < 30'000; ++i) {
    live.push_back(small_task(i));
  }
  live.clear();
  auto before = corio::detail::current_frame_pool_stats();
  for (int i = 0; i < 30'000; ++i) {
    live.push_back(small_task(i));
  }
  auto after = corio::detail::current_frame_pool_stats();
  EXPECT_EQ(after.fresh_allocations, before.fresh_allocations);
}

// A spawner allocates frames that a worker frees: the frames must flow back to the spawner through
// the depot rather than the spawner calling malloc for every new frame.
TEST(frame_pool, frames_freed_on_another_thread_flow_back_to_the_allocating_thread) {
  constexpr std::size_t rounds = 20;
  constexpr std::size_t per_round = 1000;
  std::uint64_t fresh_in_last_rounds = 0;
  for (std::size_t round = 0; round < rounds; ++round) {
    auto before = corio::detail::current_frame_pool_stats();
    std::vector<void*> frames;
    for (std::size_t i = 0; i < per_round; ++i) {
      frames.push_back(corio::detail::allocate_frame(96));
    }
    auto after = corio::detail::current_frame_pool_stats();
    if (round >= rounds / 2) {
      fresh_in_last_rounds += after.fresh_allocations - before.fresh_allocations;
    }
    std::thread freer([&frames] {
      for (void* frame : frames) {
        corio::detail::deallocate_frame(frame, 96);
      }
    });
    freer.join();
  }
  // Each freer thread keeps at most two batches (128 blocks) when it exits; the rest reach the depot.
  EXPECT_LE(fresh_in_last_rounds, (rounds / 2) * 2 * 64);
}

TEST(frame_pool, large_frames_bypass_the_pool) {
  auto before = corio::detail::current_frame_pool_stats();
  void* big = corio::detail::allocate_frame(corio::detail::max_pooled_bytes + 1);
  corio::detail::deallocate_frame(big, corio::detail::max_pooled_bytes + 1);
  auto after = corio::detail::current_frame_pool_stats();
  EXPECT_EQ(after.fresh_allocations, before.fresh_allocations);
  EXPECT_EQ(after.pooled_allocations, before.pooled_allocations);
}

TEST(frame_pool, frame_freed_on_another_thread_is_safe) {
  void* frame = corio::detail::allocate_frame(100);
  std::thread other([frame] { corio::detail::deallocate_frame(frame, 100); });
  other.join();
  void* again = corio::detail::allocate_frame(100);
  corio::detail::deallocate_frame(again, 100);
}

}  // namespace

namespace {

// ctest runs this once as is and once with CORIO_FRAME_POOL=off (test frame_pool_switched_off).
TEST(frame_pool_switch, the_environment_variable_decides_whether_frames_are_pooled) {
  const char* setting = std::getenv("CORIO_FRAME_POOL");
  bool off = setting != nullptr && (std::string(setting) == "off" || std::string(setting) == "0");
  EXPECT_EQ(corio::detail::frame_pool_enabled(), !off);
  auto before = corio::detail::current_frame_pool_stats();
  for (int i = 0; i < 1000; ++i) {
    corio::sync_wait(small_task(i));
  }
  auto after = corio::detail::current_frame_pool_stats();
  if (off) {
    EXPECT_EQ(after.pooled_allocations, 0u);  // every frame went to ::operator new
  } else {
    EXPECT_GE(after.pooled_allocations - before.pooled_allocations, 1000u);
  }
}

}  // namespace
