// corio::detail::accept_stash: the design note is in include/corio/detail/accept_stash.hpp.
#include <corio/detail/accept_stash.hpp>

#include <new>
#include <vector>

#include <corio/detail/socket.hpp>

namespace corio::detail {

int accept_stash::take() noexcept {
  if (count_.load(std::memory_order_relaxed) == 0) {
    return -1;
  }
  std::lock_guard lock(mutex_);
  if (kept_.empty()) {
    return -1;
  }
  int fd = kept_.front();
  kept_.erase(kept_.begin());
  count_.store(kept_.size(), std::memory_order_relaxed);
  return fd;
}

void accept_stash::keep(int fd) noexcept {
  {
    std::lock_guard lock(mutex_);
    if (!closed_) {
      try {
        kept_.push_back(fd);
        count_.store(kept_.size(), std::memory_order_relaxed);
        return;
      } catch (const std::bad_alloc&) {
        // Out of memory: the connection cannot be kept, and closing it is all that is left.
      }
    }
  }
  close_socket(fd);
}

void accept_stash::close_all() noexcept {
  std::vector<int> kept;
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
    kept.swap(kept_);
    count_.store(0, std::memory_order_relaxed);
  }
  for (int fd : kept) {
    close_socket(fd);
  }
}

}  // namespace corio::detail
