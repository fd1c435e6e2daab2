// The waiter of a plain channel operation; the design note is in include/corio/detail/chan_op.hpp.
#include <corio/detail/chan_op.hpp>

#include <corio/errors.hpp>

#include <mutex>

namespace corio::detail {

bool chan_op::park(std::coroutine_handle<> self) {
  stop_callback_.emplace(*stop_, on_stop{this});  // may run cancel() at once: it finds us unregistered
  {
    wake_batch woken;  // counterparts the poll completed; woken after the unlock
    std::lock_guard guard(node_.ops_->lock(node_.channel_));
    if (!cancelled_) {
      registered_ = true;
      if (!node_.ops_->poll(node_, woken)) {
        suspended_ = true;
        node_.ops_->link(node_);
        return true;  // the guard unlocks after this; from then on a waker may resume us: touch nothing
      }
    }
  }
  return completed(self);
}

void chan_op::finish_after_suspension() {
  if (suspended_) {
    suspended_ = false;
    if (in_hand_.load(std::memory_order_acquire)) {  // pairs with the release in wake_batch
      wait_until_released();
    }
  }
  stop_callback_.reset();  // waits for a cancel() in flight on another thread
  if (cancelled_) {
    throw cancelled();
  }
  if (stop_ == nullptr || !stop_->stop_requested()) {
    return;
  }
  if (!node_.ok_) {
    throw cancelled();  // closed: nothing to keep
  }
  if (node_.ops_->give_back != nullptr && node_.ops_->give_back(node_)) {
    throw cancelled();  // the received value went back to the channel, not to waste
  }
  // A delivered send stands; so does a value received from a channel whose end a receiver has seen
  // since (give_back).
}

void chan_op::cancel() noexcept {
  wake_batch woken;  // destroyed after the guard: wakes us without the lock
  std::lock_guard guard(node_.ops_->lock(node_.channel_));
  if (node_.linked_) {
    node_.ops_->unlink(node_);
    cancelled_ = true;
    woken.push(*this);
  } else if (!registered_) {
    cancelled_ = true;  // park() has not linked us yet and will see this
  }
  // registered and unlinked: a waker (or park() itself) completed the operation first
}

void chan_op::abandon() noexcept {
  suspended_ = false;
  stop_callback_.reset();  // waits for a cancel() in flight on another thread
  {
    std::lock_guard guard(node_.ops_->lock(node_.channel_));
    if (node_.linked_) {
      node_.ops_->unlink(node_);
      cancelled_ = true;
    }
  }
  if (in_hand_.load(std::memory_order_acquire)) {
    wait_until_released();  // a waker is still scheduling us: keep the frame (and executor) alive
  }
  if (!cancelled_ && node_.ok_ && node_.ops_->give_back != nullptr) {
    node_.ops_->give_back(node_);
  }
}

}  // namespace corio::detail
