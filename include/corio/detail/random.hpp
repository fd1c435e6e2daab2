#pragma once
// A per-thread pseudo-random number for fairness decisions (select's polling order, when_any's start
// order): xorshift32, whose only duty is that no position is favoured. Not for anything else.
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

namespace corio::detail {

/// The calling thread's next number.
std::uint32_t next_random() noexcept;

/// A number in [0, bound), bound > 0.
inline std::size_t random_below(std::size_t bound) noexcept { return next_random() % bound; }

/// Puts `items` in a random order (Fisher-Yates: each order equally likely, so each item equally
/// likely to come first).
template <class T>
void shuffle(std::span<T> items) noexcept {
  for (std::size_t i = items.size(); i > 1; --i) {
    std::swap(items[i - 1], items[random_below(i)]);
  }
}

}  // namespace corio::detail
