// The environment's tuning knobs (src/core/env_setting.hpp): a value a knob does not understand is
// reported once, by name, and the default is used; a count past its largest uses the largest.
#include "core/env_setting.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>

namespace {

using corio::detail::env_choice;
using corio::detail::env_count;
using corio::detail::env_knob;
using corio::detail::parse_whole_number;
using testing::internal::CaptureStderr;
using testing::internal::GetCapturedStderr;

constexpr const char* variable = "CORIO_TEST_KNOB";

// The variable set to `value` (null: unset) for one test.
struct scoped_variable {
  explicit scoped_variable(const char* value) {
    if (value != nullptr) {
      ::setenv(variable, value, 1);
    } else {
      ::unsetenv(variable);
    }
  }
  ~scoped_variable() { ::unsetenv(variable); }
};

int pool_switch(env_knob& knob) { return env_choice(knob, {{"on", 0}, {"1", 0}, {"off", 1}, {"0", 1}}, 0, "on"); }

TEST(env_setting, a_whole_number_is_all_digits_and_saturates_past_64_bits) {
  EXPECT_EQ(parse_whole_number("16"), 16u);
  EXPECT_EQ(parse_whole_number("0"), 0u);
  EXPECT_EQ(parse_whole_number("0032768"), 32768u);
  EXPECT_EQ(parse_whole_number("99999999999999999999999"), std::numeric_limits<std::uint64_t>::max());
  for (const char* text : {"", "abc", "1x16", " 5", "5 ", "+5", "-1", "1e3", "0x10"}) {
    EXPECT_FALSE(parse_whole_number(text).has_value()) << text;
  }
}

TEST(env_setting, an_unset_or_empty_knob_is_its_default_without_a_word) {
  for (const char* value : {static_cast<const char*>(nullptr), ""}) {
    scoped_variable set(value);
    env_knob choice{variable};
    env_knob count{variable};
    CaptureStderr();
    EXPECT_EQ(pool_switch(choice), 0);
    EXPECT_EQ(env_count(count, 1024, 32768), 1024u);
    EXPECT_EQ(GetCapturedStderr(), "");
  }
}

TEST(env_setting, a_known_word_or_a_count_in_range_is_taken_as_it_is) {
  env_knob knob{variable};
  CaptureStderr();
  {
    scoped_variable set("off");
    EXPECT_EQ(pool_switch(knob), 1);
  }
  {
    scoped_variable set("0");
    EXPECT_EQ(pool_switch(knob), 1);
  }
  {
    scoped_variable set("1");
    EXPECT_EQ(pool_switch(knob), 0);
  }
  for (const char* value : {"1", "2", "1000", "32768"}) {
    scoped_variable set(value);
    EXPECT_EQ(env_count(knob, 1024, 32768), std::stoull(value));
  }
  EXPECT_EQ(GetCapturedStderr(), "");
}

TEST(env_setting, an_unknown_word_is_reported_once_and_the_default_used) {
  env_knob knob{variable};
  scoped_variable set("false");  // once left the frame pool silently on
  CaptureStderr();
  EXPECT_EQ(pool_switch(knob), 0);
  EXPECT_EQ(pool_switch(knob), 0);  // read again (another reactor): no second line
  EXPECT_EQ(GetCapturedStderr(), "corio: CORIO_TEST_KNOB=false is not on, 1, off or 0; using on\n");
}

TEST(env_setting, a_count_that_is_not_one_uses_the_default_and_one_too_large_the_largest) {
  struct {
    const char* value;
    std::uint64_t used;
  } const cases[] = {{"abc", 1024}, {"0", 1024}, {"1x16", 1024}, {"-4", 1024}, {"40000", 32768},
                     {"99999999999999999999999", 32768}};
  for (const auto& each : cases) {
    env_knob knob{variable};
    scoped_variable set(each.value);
    CaptureStderr();
    EXPECT_EQ(env_count(knob, 1024, 32768), each.used) << each.value;
    EXPECT_EQ(env_count(knob, 1024, 32768), each.used) << each.value;
    EXPECT_EQ(GetCapturedStderr(), std::string("corio: CORIO_TEST_KNOB=") + each.value +
                                       " is not a whole number from 1 to 32768; using " + std::to_string(each.used) +
                                       "\n");
  }
}

}  // namespace
