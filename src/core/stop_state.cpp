// corio::detail::stop_state: the request and the slow paths (design note in stop_state.hpp).
#include <corio/detail/stop_state.hpp>

#include "cpu_relax.hpp"

namespace corio::detail {

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
  requester_ = this_thread_id();
  bool gone = false;
  gone_ = &gone;
  while (head_ != nullptr) {
    stop_callback_base& callback = *head_;
    unlink(callback);
    running_ = &callback;
    bool destroyed = false;
    callback.destroyed_ = &destroyed;
    unlock(word);
    callback.invoke_(callback);
    if (gone) {
      return true;  // the callback ended this state's owner (and the callback with it)
    }
    if (!destroyed) {
      callback.done_.store(true, std::memory_order_release);
    }
    word = lock();
  }
  running_ = nullptr;
  gone_ = nullptr;
  unlock(word);
  return true;
}

void stop_state::tell_requester_gone() noexcept {
  std::uint32_t word = lock();
  if (gone_ != nullptr && requester_ == this_thread_id()) {
    *gone_ = true;
  }
  unlock(word);
}

const void* stop_state::this_thread_id() noexcept {
  thread_local const char marker = 0;
  return &marker;
}

void stop_state::wait_until_done(stop_callback_base& callback) noexcept {
  std::uint32_t word = lock();
  bool running = running_ == &callback;
  if (running && requester_ == this_thread_id()) {
    *callback.destroyed_ = true;  // destroyed inside its own invocation: the requester leaves it alone
    unlock(word);
    return;
  }
  unlock(word);
  back_off_while([&] { return !callback.done_.load(std::memory_order_acquire); });
}

}  // namespace corio::detail
