// A worker's spin before it sleeps: full while peers answer within it, shrinking to nothing while
// they answer later, full again as soon as a wait shows a full spin would have caught the answer,
// and probed now and then while off.
#include <corio/detail/spin_budget.hpp>

#include <gtest/gtest.h>

#include <chrono>

namespace {

using namespace std::chrono_literals;
using corio::detail::spin_budget;

// One wait: a spin that gives up, then `slept`; returns the spin's length.
std::chrono::nanoseconds wait_in_vain(spin_budget& spin, std::chrono::nanoseconds slept) {
  auto length = spin.start();
  spin.gave_up(length, slept);
  return length;
}

TEST(spin_budget, starts_full_and_stays_full_while_spins_catch_work) {
  spin_budget spin(50us);
  EXPECT_EQ(spin.start(), 50us);
  spin.caught();
  EXPECT_EQ(spin.start(), 50us);
}

TEST(spin_budget, halves_after_each_wait_longer_than_a_full_spin_down_to_none) {
  spin_budget spin(50us);
  EXPECT_EQ(wait_in_vain(spin, 60us), 50us);  // 110 us: past twice a full spin, wake-up latency allowed for
  EXPECT_EQ(wait_in_vain(spin, 200us), 25us);
  EXPECT_EQ(wait_in_vain(spin, 200us), 12500ns);
  EXPECT_EQ(wait_in_vain(spin, 200us), 6250ns);
  EXPECT_EQ(wait_in_vain(spin, 200us), 3125ns);
  EXPECT_EQ(wait_in_vain(spin, 200us), 1562ns);
  EXPECT_EQ(wait_in_vain(spin, 200us), 0ns) << "under a microsecond: a single poll, no spin";
  EXPECT_EQ(wait_in_vain(spin, 200us), 0ns);
}

TEST(spin_budget, is_full_again_once_a_wait_was_shorter_than_a_full_spin) {
  spin_budget spin(50us);
  wait_in_vain(spin, 1ms);
  wait_in_vain(spin, 1ms);
  EXPECT_EQ(wait_in_vain(spin, 80us), 12500ns);  // 92.5 us: a 50 us spin and a wake-up would have caught it
  EXPECT_EQ(spin.start(), 50us);
}

TEST(spin_budget, a_spin_that_caught_work_restores_the_full_length) {
  spin_budget spin(50us);
  wait_in_vain(spin, 1ms);
  ASSERT_EQ(spin.start(), 25us);
  spin.caught();
  EXPECT_EQ(spin.start(), 50us);
}

TEST(spin_budget, while_off_every_sixteenth_wait_probes_with_a_full_spin) {
  spin_budget spin(50us);
  while (wait_in_vain(spin, 1ms) != 0ns) {
  }
  std::uint32_t waits_without_spin = 1;  // the one that ended the loop
  for (int round = 0; round < 3; ++round) {
    std::chrono::nanoseconds length{};
    while ((length = wait_in_vain(spin, 1ms)) == 0ns) {
      ++waits_without_spin;
    }
    EXPECT_EQ(length, 50us) << "round " << round;  // the probe; it gives up, so spins stay off
    EXPECT_EQ(waits_without_spin, spin_budget::probe_every - 1) << "round " << round;
    waits_without_spin = 0;
  }
  for (std::uint32_t wait = 1; wait < spin_budget::probe_every; ++wait) {
    ASSERT_EQ(wait_in_vain(spin, 1ms), 0ns);
  }
  ASSERT_EQ(spin.start(), 50us);
  spin.caught();  // the probe found the peer fast again
  EXPECT_EQ(spin.start(), 50us);
  EXPECT_EQ(spin.start(), 50us);
}

}  // namespace
