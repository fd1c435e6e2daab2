#include <corio/generator.hpp>

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace {

corio::generator<int> iota(int n) {
  for (int i = 0; i < n; ++i) {
    co_yield i;
  }
}

TEST(generator, yields_values_in_order_in_range_for) {
  std::vector<int> seen;
  for (int value : iota(5)) {
    seen.push_back(value);
  }
  EXPECT_EQ(seen, (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(generator, empty_sequence_yields_nothing) {
  int count = 0;
  for ([[maybe_unused]] int value : iota(0)) {
    ++count;
  }
  EXPECT_EQ(count, 0);
}

TEST(generator, body_runs_lazily_one_step_at_a_time) {
  int steps = 0;
  auto counting = [&]() -> corio::generator<int> {
    for (int i = 0; i < 3; ++i) {
      ++steps;
      co_yield i;
    }
  };
  auto gen = counting();
  EXPECT_EQ(steps, 0);
  auto it = gen.begin();
  EXPECT_EQ(steps, 1);
  ++it;
  EXPECT_EQ(steps, 2);
}

TEST(generator, exception_propagates_from_increment) {
  auto failing = []() -> corio::generator<int> {
    co_yield 1;
    throw std::runtime_error("generator failed");
  };
  auto gen = failing();
  auto it = gen.begin();
  EXPECT_EQ(*it, 1);
  EXPECT_THROW(++it, std::runtime_error);
}

TEST(generator, yields_references_to_lvalues) {
  std::vector<std::string> words{"a", "b"};
  auto refs = [&]() -> corio::generator<std::string&> {
    for (auto& word : words) {
      co_yield word;
    }
  };
  for (std::string& word : refs()) {
    word += "!";
  }
  EXPECT_EQ(words, (std::vector<std::string>{"a!", "b!"}));
}

TEST(generator, iterating_a_moved_from_generator_throws_invalid_task) {
  auto gen = iota(3);
  auto other = std::move(gen);
  EXPECT_THROW(gen.begin(), corio::invalid_task);
  EXPECT_EQ(*other.begin(), 0);
}

TEST(generator, abandoning_iteration_midway_destroys_the_frame) {
  auto owner = std::make_shared<int>(1);
  std::weak_ptr<int> watch = owner;
  {
    auto holding = [](std::shared_ptr<int> held) -> corio::generator<int> {
      for (;;) {
        co_yield *held;
      }
    };
    auto gen = holding(std::move(owner));
    EXPECT_EQ(*gen.begin(), 1);
  }
  EXPECT_TRUE(watch.expired());
}

}  // namespace
