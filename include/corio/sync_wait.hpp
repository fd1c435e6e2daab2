#pragma once
// corio::sync_wait: run an awaitable to completion from ordinary (non-coroutine) code.
#include <chrono>
#include <condition_variable>
#include <coroutine>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include <corio/detail/awaitable_traits.hpp>
#include <corio/detail/executor.hpp>
#include <corio/detail/frame_pool.hpp>
#include <corio/detail/result_slot.hpp>

namespace corio {
namespace detail {

// Blocks the calling thread until the driver coroutine says it is finished. The flag is set and
// signalled under the mutex, so the waiter cannot return (and free this object) while the completing
// thread still touches it.
class completion_signal {
 public:
  void set() {
    std::lock_guard lock(mutex_);
    done_ = true;
    ready_.notify_one();
  }
  void wait() {
    std::unique_lock lock(mutex_);
    ready_.wait(lock, [this] { return done_; });
  }
  /// False if `deadline` passed first.
  template <class Clock, class Duration>
  bool wait_until(std::chrono::time_point<Clock, Duration> deadline) {
    std::unique_lock lock(mutex_);
    return ready_.wait_until(lock, deadline, [this] { return done_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  bool done_ = false;
};

template <class T>
class sync_wait_driver;

struct signal_on_final_suspend {
  bool await_ready() const noexcept { return false; }
  template <class Promise>
  void await_suspend(std::coroutine_handle<Promise> self) const noexcept {
    self.promise().signal_->set();
  }
  void await_resume() const noexcept {}
};

template <class T>
struct sync_wait_promise_common : pooled_frame {
  completion_signal* signal_ = nullptr;
  result_slot<T> result_;

  std::suspend_always initial_suspend() const noexcept { return {}; }
  signal_on_final_suspend final_suspend() const noexcept { return {}; }
  void unhandled_exception() noexcept { result_.set_exception(std::current_exception()); }
};

template <class T>
struct sync_wait_promise : sync_wait_promise_common<T> {
  sync_wait_driver<T> get_return_object() noexcept;
  template <class U>
  void return_value(U&& value) {
    this->result_.set_value(std::forward<U>(value));
  }
};

template <>
struct sync_wait_promise<void> : sync_wait_promise_common<void> {
  sync_wait_driver<void> get_return_object() noexcept;
  void return_void() const noexcept {}
};

template <class T>
class sync_wait_driver {
 public:
  using promise_type = sync_wait_promise<T>;

  explicit sync_wait_driver(std::coroutine_handle<promise_type> handle) : handle_(handle) {}
  sync_wait_driver(sync_wait_driver&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  ~sync_wait_driver() {
    if (handle_) {
      handle_.destroy();
    }
  }

  T run() {
    completion_signal signal;
    handle_.promise().signal_ = &signal;
    detail::resume_top(handle_);
    signal.wait();
    return handle_.promise().result_.take();
  }

  /// run(), calling `on_deadline` once if `deadline` passes first (to make the awaitable end, by a
  /// stop request), then waiting for it to end.
  template <class Clock, class Duration, class OnDeadline>
  T run_until(std::chrono::time_point<Clock, Duration> deadline, OnDeadline on_deadline) {
    completion_signal signal;
    handle_.promise().signal_ = &signal;
    detail::resume_top(handle_);
    if (!signal.wait_until(deadline)) {
      on_deadline();
      signal.wait();
    }
    return handle_.promise().result_.take();
  }

 private:
  std::coroutine_handle<promise_type> handle_;
};

template <class T>
sync_wait_driver<T> sync_wait_promise<T>::get_return_object() noexcept {
  return sync_wait_driver<T>{std::coroutine_handle<sync_wait_promise<T>>::from_promise(*this)};
}

inline sync_wait_driver<void> sync_wait_promise<void>::get_return_object() noexcept {
  return sync_wait_driver<void>{std::coroutine_handle<sync_wait_promise<void>>::from_promise(*this)};
}

template <class A>
sync_wait_driver<await_result_t<A>> make_sync_wait_driver(A&& awaitable) {
  if constexpr (std::is_void_v<await_result_t<A>>) {
    co_await std::forward<A>(awaitable);
  } else {
    co_return co_await std::forward<A>(awaitable);
  }
}

}  // namespace detail

/// Runs `awaitable` on the calling thread until it first suspends, then blocks the thread until it
/// completes (possibly on another thread) and returns its result or rethrows its exception.
/// Throws std::logic_error when called on a thread that runs an event loop or a runtime worker:
/// blocking it would deadlock a one-worker runtime and silently stall any other (co_await instead);
/// and from a frame's destructor while an executor's shutdown destroys frames on this thread (it
/// would wait for what only that shutdown can end).
///
///     int v = corio::sync_wait(compute());   // compute() returns corio::task<int>
template <class A>
detail::await_result_t<A> sync_wait(A&& awaitable) {
  if (const char* why = detail::blocking_refused_here()) {
    throw std::logic_error(std::string("corio::sync_wait: called ") + why);
  }
  return detail::make_sync_wait_driver(std::forward<A>(awaitable)).run();
}

}  // namespace corio
