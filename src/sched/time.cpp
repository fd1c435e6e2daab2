// sleep_awaiter; the state machine is described in include/corio/time.hpp.
#include <corio/time.hpp>

#include <corio/detail/coop_budget.hpp>

namespace corio::detail {

bool sleep_awaiter::suspend(std::coroutine_handle<> self) {
  owner_ = current_executor;
  if (owner_ == nullptr) {
    throw std::logic_error("corio::sleep: no event loop or runtime runs on this thread");
  }
  if ((stop_ != nullptr && stop_->stop_requested()) || deadline() <= clock::now()) {
    return yield_if_budget_spent(self);  // cancelled, or already due: no wait, but it still costs budget
  }
  waiter_ = self;
  arm();
  if (stop_ != nullptr) {
    stop_callback_.emplace(*stop_, on_stop{this});
  }
  state expected = registering;
  if (state_.compare_exchange_strong(expected, waiting, std::memory_order_acq_rel)) {
    return true;  // from here on another thread may resume us: touch nothing
  }
  disarm();  // cancelled while registering
  return yield_if_budget_spent(self);
}

// Moves the state to `settled`. Returns true if it was `waiting`, i.e. the caller must schedule the
// waiter.
bool sleep_awaiter::settle() noexcept {
  state current = state_.load(std::memory_order_acquire);
  while (current != settled) {
    if (state_.compare_exchange_weak(current, settled, std::memory_order_acq_rel)) {
      return current == waiting;
    }
  }
  return false;
}

void sleep_awaiter::on_fire(timer& t) noexcept {
  auto& self = static_cast<sleep_awaiter&>(t);
  if (self.settle()) {
    self.owner_->schedule(self.waiter_);
  }
}

void sleep_awaiter::on_stop::operator()() const noexcept {
  if (self->settle()) {
    self->owner_->schedule(self->waiter_);
  }
}

}  // namespace corio::detail
