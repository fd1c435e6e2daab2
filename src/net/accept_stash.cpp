// corio::detail::accept_stash: the design note is in include/corio/detail/accept_stash.hpp.
#include <corio/detail/accept_stash.hpp>

#include <sys/socket.h>

#include <new>
#include <utility>
#include <vector>

#include <corio/detail/io_op.hpp>
#include <corio/detail/socket.hpp>

namespace corio::detail {

int accept_stash::take() noexcept {
  if (count_.load(std::memory_order_relaxed) == 0) {
    return -1;
  }
  std::lock_guard lock(mutex_);
  return kept_.empty() ? -1 : take_oldest();
}

int accept_stash::take_oldest() noexcept {
  int fd = kept_.front();
  kept_.erase(kept_.begin());
  count_.store(kept_.size(), std::memory_order_relaxed);
  return fd;
}

void accept_stash::keep(int fd) noexcept {
  {
    std::lock_guard lock(mutex_);
    if (!closed_) {
      if (accept_waiter* oldest = waiting_.front()) {
        waiting_.remove(*oldest);
        hand(*oldest, fd);
        return;
      }
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

void accept_stash::wait(accept_waiter& waiter) noexcept {
  std::lock_guard lock(mutex_);
  waiter.registered = true;
  if (!kept_.empty()) {
    hand(waiter, take_oldest());  // kept after start() looked: this accept takes it now
    return;
  }
  waiting_.push_back(waiter);
}

int accept_stash::take_pending(int listener) noexcept {
  std::lock_guard lock(mutex_);
  if (closed_ || waiting_.empty()) {
    return -1;
  }
  int fd = ::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  return fd >= 0 ? fd : -1;  // EAGAIN: nothing was left behind
}

int accept_stash::stop_waiting(accept_waiter& waiter) noexcept {
  if (!waiter.registered) {
    return -1;
  }
  std::lock_guard lock(mutex_);
  waiter.registered = false;
  if (waiter.listed) {
    waiting_.remove(waiter);
  }
  return std::exchange(waiter.handed, -1);
}

void accept_stash::hand(accept_waiter& waiter, int fd) noexcept {
  waiter.handed = fd;
  request_io_cancel(*waiter.op);  // its op is alive: it unlists under the mutex this caller holds
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
