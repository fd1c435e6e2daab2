// The per-thread fairness numbers; see include/corio/detail/random.hpp.
#include <corio/detail/random.hpp>

namespace corio::detail {

std::uint32_t next_random() noexcept {
  thread_local std::uint32_t state = 0x9e3779b9u ^ static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(&state));
  state ^= state << 13;
  state ^= state >> 17;
  state ^= state << 5;
  return state;
}

}  // namespace corio::detail
