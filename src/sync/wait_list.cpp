// The cancellable waiter behind every sync primitive; the design note is in
// include/corio/detail/wait_list.hpp.
#include <corio/detail/wait_list.hpp>

#include <corio/detail/coop_budget.hpp>

#include <mutex>

#include "core/cpu_relax.hpp"

namespace corio::detail {

void spin_lock::wait_until_free() const noexcept {
  back_off_while([this] { return locked_.load(std::memory_order_relaxed); });
}

void parked_coroutine::wait_until_released() const noexcept {
  back_off_while([this] { return in_hand_.load(std::memory_order_acquire); });
}

// Runs without the lock. The node is read before it is released; once released it may be freed.
void wake_batch::resume_all() noexcept {
  while (head_ != nullptr) {
    parked_coroutine& w = *head_;
    head_ = w.batch_next_;
    executor* owner = w.owner_;
    std::coroutine_handle<> handle = w.handle_;
    if (owner != nullptr && owner->try_schedule(handle)) {
      w.in_hand_.store(false, std::memory_order_release);  // the waiter (or its destructor) may go on
    } else {
      w.in_hand_.store(false, std::memory_order_release);  // before resuming: it polls on this thread
      resume_top(handle);
    }
  }
  tail_ = nullptr;
}

bool waiter::suspend(std::coroutine_handle<> self, stop_state* stop) {
  if (stop != nullptr && stop->stop_requested()) {
    state_ = state::cancelled;
    return yield_if_budget_spent(self, &suspended_);
  }
  stop_ = stop;
  handle_ = self;
  owner_ = current_owner();
  if (stop != nullptr && stop->stop_possible()) {
    bool granted = false;
    {
      std::lock_guard guard(list_->mutex());
      granted = ops_->try_now(context_);
      if (granted) {
        state_ = state::granted;
      }
    }
    if (granted) {
      return yield_if_budget_spent(self, &suspended_);
    }
    // Registered before the waiter is linked, and without the lock: if stop was requested meanwhile,
    // cancel() runs right here, finds the waiter idle and marks it cancelled.
    stop_callback_.emplace(*stop, on_stop{this});
  }
  {
    std::lock_guard guard(list_->mutex());
    if (state_ != state::cancelled) {
      if (!ops_->try_now(context_)) {
        list_->push_back(*this);
        suspended_ = true;
        return true;  // the guard unlocks after this; from then on a waker may resume us: touch nothing
      }
      state_ = state::granted;
    }
  }
  return yield_if_budget_spent(self, &suspended_);  // queued counts as suspended: abandon() gives back a grant
}

void waiter::cancel() noexcept {
  wake_batch woken;  // destroyed after the guard: wakes us without the lock
  std::lock_guard guard(list_->mutex());
  if (state_ == state::idle) {
    state_ = state::cancelled;  // suspend() has not linked us yet and will see this
  } else if (state_ == state::waiting) {
    list_->remove(*this);
    state_ = state::cancelled;
    woken.push(*this);
  }
  // granted or cancelled: the other side already won
}

void waiter::abandon() noexcept {
  if (!suspended_) {
    return;
  }
  // The frame is destroyed while the waiter is parked, or after it was woken but before it resumed.
  suspended_ = false;
  stop_callback_.reset();  // waits for a cancel() in flight on another thread
  bool give_back = false;
  {
    std::lock_guard guard(list_->mutex());
    if (state_ == state::waiting) {
      list_->remove(*this);
      state_ = state::cancelled;
    }
    give_back = state_ == state::granted;
  }
  if (in_hand_.load(std::memory_order_acquire)) {
    wait_until_released();  // a waker is still scheduling us: keep the frame (and executor) alive
  }
  if (give_back && ops_->give_back != nullptr) {
    ops_->give_back(context_);
  }
}

}  // namespace corio::detail
