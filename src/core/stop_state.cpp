// corio::detail::stop_state: the request and the slow paths (design note in stop_state.hpp).
#include <corio/detail/stop_state.hpp>

#include "cpu_relax.hpp"
#include "thread_marks.hpp"

namespace corio::detail {

namespace {

// A request this thread is running (see "destruction inside a callback").
struct request_outcome {
  bool state_gone = false;  // the state was destroyed inside one of the request's callbacks
};
using running_request = thread_mark<stop_state, request_outcome>;

}  // namespace

std::uint32_t stop_state::lock_contended() noexcept {
  std::uint32_t word = 0;
  back_off_while([&] {
    word = word_.load(std::memory_order_relaxed);
    return (word & locked) != 0 ||
           !word_.compare_exchange_weak(word, word | locked, std::memory_order_acquire, std::memory_order_relaxed);
  });
  return word;
}

bool stop_state::request_stop(bool for_deadline) noexcept {
  if (!stop_possible()) {
    return false;
  }
  std::uint32_t word = lock();
  if ((word & requested) != 0) {
    unlock(word);
    return false;
  }
  word |= for_deadline ? requested | deadline : requested;  // published by the next unlock, before any callback runs
  running_request listed(this);
  while (head_ != nullptr) {
    stop_callback_base& callback = *head_;
    unlink(callback);
    running_ = &callback;
    bool destroyed = false;
    callback.destroyed_ = &destroyed;
    unlock(word);
    callback.invoke_(callback);
    if (listed.extra.state_gone) {
      return true;  // the callback ended this state's owner (and the callback with it)
    }
    if (!destroyed) {
      callback.done_.store(true, std::memory_order_release);
    }
    word = lock();
  }
  running_ = nullptr;
  unlock(word);
  return true;
}

void stop_state::tell_requester_gone() const noexcept {
  if (running_request* request = running_request::find(this)) {
    request->extra.state_gone = true;
  }
}

void stop_state::wait_until_done(stop_callback_base& callback) noexcept {
  std::uint32_t word = lock();
  // Running here: this thread's own request popped it (its mark for this state is on the list).
  if (running_ == &callback && running_request::find(this) != nullptr) {
    *callback.destroyed_ = true;  // destroyed inside its own invocation: the requester leaves it alone
    unlock(word);
    return;
  }
  unlock(word);
  back_off_while([&] { return !callback.done_.load(std::memory_order_acquire); });
}

}  // namespace corio::detail
