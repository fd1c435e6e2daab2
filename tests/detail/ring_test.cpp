#include <corio/detail/ring.hpp>

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace {

using corio::detail::ring;
using strings = std::vector<std::string>;

// Lent slots, as a bounded channel lends its co-allocated buffer.
template <std::size_t N>
struct lent_slots {
  alignas(std::string) std::array<unsigned char, N * sizeof(std::string)> bytes;
  std::string* data() noexcept { return reinterpret_cast<std::string*>(bytes.data()); }
};

// Pops `count` values (all of them by default), oldest first.
strings pop(ring<std::string>& r, std::size_t count = SIZE_MAX) {
  strings out;
  for (; count > 0 && !r.empty(); --count) {
    std::optional<std::string> value;
    r.pop_front_into(value);
    out.push_back(*value);
  }
  return out;
}

TEST(ring, an_emptied_ring_starts_again_at_its_first_slot) {
  lent_slots<4> slots;
  ring<std::string> r(slots.data(), 4);
  r.push_back("a");
  r.push_back("b");
  EXPECT_EQ(pop(r), (strings{"a", "b"}));
  r.push_back("c");  // the ring was empty: "c" goes to slot 0, not slot 2
  EXPECT_EQ(slots.data()[0], "c");
  EXPECT_EQ(pop(r), strings{"c"});
}

TEST(ring, keeps_fifo_order_across_wrap_reset_and_push_front) {
  lent_slots<3> slots;
  ring<std::string> r(slots.data(), 3);
  r.push_back("1");
  r.push_back("2");
  EXPECT_EQ(pop(r, 1), strings{"1"});
  r.push_back("3");
  r.push_back("4");  // wraps to slot 0
  EXPECT_EQ(pop(r), (strings{"2", "3", "4"}));  // empty again: back to slot 0
  r.push_front("0");  // in front of an empty ring: the last slot
  r.push_back("5");
  EXPECT_EQ(pop(r), (strings{"0", "5"}));
}

TEST(ring, grows_past_lent_slots_keeping_order) {
  lent_slots<2> slots;
  ring<std::string> r(slots.data(), 2);
  r.push_back("x");
  r.push_back("y");
  r.push_front("w");  // full: grows into owned storage
  r.push_back("z");
  EXPECT_EQ(pop(r), (strings{"w", "x", "y", "z"}));
}

// In place, as a socket's completion queue uses it: the front is updated while it stays queued, and
// for_each visits oldest first across a wrap and after growing.
TEST(ring, front_pop_front_and_for_each_see_fifo_order_across_wrap_and_growth) {
  lent_slots<3> slots;
  ring<std::string> r(slots.data(), 3);
  r.push_back("a");
  r.push_back("b");
  r.front() += "!";
  EXPECT_EQ(r.front(), "a!");
  r.pop_front();
  r.push_back("c");
  r.push_back("d");  // wraps to slot 0
  strings seen;
  r.for_each([&](const std::string& each) { seen.push_back(each); });
  EXPECT_EQ(seen, (strings{"b", "c", "d"}));
  r.push_back("e");  // full: grows
  seen.clear();
  r.for_each([&](const std::string& each) { seen.push_back(each); });
  EXPECT_EQ(seen, (strings{"b", "c", "d", "e"}));
  EXPECT_EQ(pop(r), (strings{"b", "c", "d", "e"}));
}

}  // namespace
