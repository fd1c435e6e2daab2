#pragma once
// A per-thread pseudo-random number for fairness decisions (select's polling order, when_any's start
// order): xorshift32, whose only duty is that no position is favoured. Not for anything else.
#include <cstddef>
#include <cstdint>

namespace corio::detail {

/// The calling thread's next number.
std::uint32_t next_random() noexcept;

/// A number in [0, bound), bound > 0.
inline std::size_t random_below(std::size_t bound) noexcept { return next_random() % bound; }

}  // namespace corio::detail
