// sleep_awaiter; the state machine is described in include/corio/time.hpp.
#include <corio/time.hpp>

#include <corio/detail/coop_budget.hpp>

namespace corio::detail {

bool sleep_awaiter::suspend(std::coroutine_handle<> self) {
  owner_ = current_executor;
  if (owner_ == nullptr) {
    throw std::logic_error("corio::sleep: no event loop or runtime runs on this thread");
  }
  if (stop_ != nullptr && stop_->stop_requested()) {
    return yield_if_budget_spent(self);  // cancelled without waiting still costs budget
  }
  waiter_ = self;
  if (stop_ != nullptr) {
    stop_callback_.emplace(*stop_, on_stop{this});
  }
  if (owner_->timers().arm(*this)) {
    owner_->earliest_timer_changed();
  }
  state expected = registering;
  if (state_.compare_exchange_strong(expected, armed, std::memory_order_acq_rel)) {
    return true;  // from here on another thread may resume us: touch nothing
  }
  owner_->timers().disarm(*this);  // settled early (fired or cancelled) while registering
  return yield_if_budget_spent(self);
}

// Moves the state out of `registering` (to `early`) or `armed` (to `late`). Returns true if it was
// `armed`, i.e. the caller must schedule the waiter.
bool sleep_awaiter::settle(state early, state late) noexcept {
  state current = state_.load(std::memory_order_acquire);
  for (;;) {
    state next = current == registering ? early : current == armed ? late : current;
    if (next == current) {
      return false;  // already settled by the other side
    }
    if (state_.compare_exchange_weak(current, next, std::memory_order_acq_rel)) {
      return current == armed;
    }
  }
}

void sleep_awaiter::on_fire(timer_queue::timer& t) noexcept {
  auto& self = static_cast<sleep_awaiter&>(t);
  if (self.settle(fired_early, fired)) {
    self.owner_->schedule(self.waiter_);
  }
}

void sleep_awaiter::cancel() noexcept {
  if (settle(cancelled_early, cancelled_late)) {
    owner_->timers().disarm(*this);
    owner_->schedule(waiter_);
  }
}

}  // namespace corio::detail
