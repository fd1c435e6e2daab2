// corio::detail::stop_state: the request and the slow paths (design note in stop_state.hpp).
#include <corio/detail/stop_state.hpp>

#include "cpu_relax.hpp"

namespace corio::detail {

namespace {

// A request this thread is running, in the thread's list of them (innermost first).
struct running_request {
  const stop_state* state;
  running_request* outer;
  bool gone = false;  // the state was destroyed inside one of the request's callbacks
};
thread_local constinit running_request* requests_here = nullptr;

class listed_request {
 public:
  explicit listed_request(const stop_state* state) noexcept : entry_{state, requests_here} { requests_here = &entry_; }
  listed_request(const listed_request&) = delete;
  listed_request& operator=(const listed_request&) = delete;
  ~listed_request() { requests_here = entry_.outer; }
  bool gone() const noexcept { return entry_.gone; }

 private:
  running_request entry_;
};

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
  requester_ = this_thread_id();
  listed_request listed(this);
  while (head_ != nullptr) {
    stop_callback_base& callback = *head_;
    unlink(callback);
    running_ = &callback;
    bool destroyed = false;
    callback.destroyed_ = &destroyed;
    unlock(word);
    callback.invoke_(callback);
    if (listed.gone()) {
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
  for (running_request* request = requests_here; request != nullptr; request = request->outer) {
    if (request->state == this) {
      request->gone = true;
      return;
    }
  }
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
