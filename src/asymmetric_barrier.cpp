// membarrier(2)-based asymmetric barrier; the reasoning is in include/corio/detail/asymmetric_barrier.hpp.
#include <corio/detail/asymmetric_barrier.hpp>

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace corio::detail {

std::atomic<barrier_mode> current_barrier_mode{barrier_mode::unknown};

namespace {

long membarrier(int command) noexcept { return ::syscall(SYS_membarrier, command, 0, 0); }

bool forced_symmetric() noexcept {
  const char* value = std::getenv("CORIO_POST_BARRIER");
  return value != nullptr && std::strcmp(value, "symmetric") == 0;
}

barrier_mode probe() noexcept {
  if (forced_symmetric()) {
    return barrier_mode::symmetric;
  }
  long supported = membarrier(MEMBARRIER_CMD_QUERY);
  if (supported < 0 || (supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) {
    return barrier_mode::symmetric;
  }
  if (membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) != 0) {
    return barrier_mode::symmetric;
  }
  return barrier_mode::asymmetric;
}

}  // namespace

barrier_mode resolve_barrier_mode() noexcept {
  // Function-local static: probed exactly once even if many threads get here together.
  static const barrier_mode resolved = probe();
  current_barrier_mode.store(resolved, std::memory_order_relaxed);
  return resolved;
}

void heavy_barrier() noexcept {
  if (asymmetric_barriers()) {
    membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED);
  }
}

}  // namespace corio::detail
