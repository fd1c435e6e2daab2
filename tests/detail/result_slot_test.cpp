// detail::result_slot: taking an exception moves it out, so the slot (a spawned task's record, which
// its worker may destroy later) no longer shares it with the thread that handles it. ThreadSanitizer
// cannot see the exception's reference count, and reported that hand-over as a race.
#include <corio/detail/result_slot.hpp>

#include <gtest/gtest.h>

#include <exception>
#include <stdexcept>

namespace {

TEST(result_slot, taking_an_exception_moves_it_out_of_the_slot) {
  corio::detail::result_slot<int> slot;
  slot.set_exception(std::make_exception_ptr(std::runtime_error("failed")));
  EXPECT_THROW(slot.take(), std::runtime_error);
  EXPECT_EQ(slot.error(), nullptr);
  corio::detail::result_slot<void> nothing;
  nothing.set_exception(std::make_exception_ptr(std::runtime_error("failed")));
  EXPECT_THROW(nothing.take(), std::runtime_error);
  EXPECT_EQ(nothing.error(), nullptr);
}

}  // namespace
