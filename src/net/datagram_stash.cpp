// corio::detail::datagram_stash: the design note is in include/corio/detail/datagram_stash.hpp.
#include <corio/detail/datagram_stash.hpp>

#include <utility>

#include <corio/detail/io_op.hpp>

namespace corio::detail {

std::optional<datagram_stash::kept> datagram_stash::take() {
  std::lock_guard guard(mutex_);
  if (kept_.empty()) {
    return std::nullopt;
  }
  return take_oldest();
}

datagram_stash::kept datagram_stash::take_oldest() noexcept {
  kept oldest = std::move(kept_.front());
  kept_.erase(kept_.begin());
  count_.store(kept_.size(), std::memory_order_relaxed);
  return oldest;
}

void datagram_stash::keep(kept datagram, bool oldest) {
  std::lock_guard guard(mutex_);
  if (closed_) {
    return;  // nobody can receive it any more
  }
  if (datagram_waiter* waiting = waiting_.front()) {
    waiting_.remove(*waiting);
    hand(*waiting, std::move(datagram));
    return;
  }
  kept_.insert(oldest ? kept_.begin() : kept_.end(), std::move(datagram));
  count_.store(kept_.size(), std::memory_order_relaxed);
}

void datagram_stash::wait(datagram_waiter& waiter) noexcept {
  std::lock_guard guard(mutex_);
  waiter.registered = true;
  if (closed_) {
    return;  // its op ends with the socket's close
  }
  if (!kept_.empty()) {
    hand(waiter, take_oldest());  // kept after start() looked: this receive takes it now
    return;
  }
  waiting_.push_back(waiter);
}

std::optional<datagram_stash::kept> datagram_stash::stop_waiting(datagram_waiter& waiter) noexcept {
  if (!waiter.registered) {
    return std::nullopt;
  }
  std::lock_guard guard(mutex_);
  waiter.registered = false;
  if (waiter.listed) {
    waiting_.remove(waiter);
  }
  return std::exchange(waiter.handed, std::nullopt);
}

void datagram_stash::hand(datagram_waiter& waiter, kept&& datagram) noexcept {
  waiter.handed = std::move(datagram);
  request_io_cancel(*waiter.op);  // its op is alive: it unlists under the mutex this caller holds
}

void datagram_stash::close() noexcept {
  std::vector<kept> dropped;
  std::lock_guard guard(mutex_);
  closed_ = true;
  dropped.swap(kept_);
  count_.store(0, std::memory_order_relaxed);
}

}  // namespace corio::detail
