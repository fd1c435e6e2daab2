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
#include <vector>

#include <corio/detail/awaitable_traits.hpp>
#include <corio/detail/executor.hpp>
#include <corio/detail/frame_pool.hpp>
#include <corio/detail/result_slot.hpp>
#include <corio/detail/root.hpp>

namespace corio {
namespace detail {

// The blocked thread of one sync_wait, as the executor of the chain it drives: a coroutine of that
// chain that parks on this thread records it as its owner (current_owner()), and whoever wakes it,
// on any thread, queues it here; the blocked thread resumes it. So the chain never runs on its
// waker's thread: not inside a runtime task's send, and not through a worker that is later destroyed
// (it used to be resumed inline there, and record that worker as its owner at its next park).
// It is not `current_executor`: the thread stays a plain one (it may block, it has no timers and
// owns no tasks), so the members other than the queue refuse or do nothing.
// Threads: schedule() and finish() from any thread, under the mutex, so the blocked thread cannot
// return (and free this object) while one of them still touches it; run_until_done() on the blocked
// thread only.
class sync_wait_executor final : public executor {
 public:
  void schedule(std::coroutine_handle<> handle) noexcept override {
    std::lock_guard lock(mutex_);
    ready_.push_back(handle);  // a handful at most: one per branch of the chain parked here
    wake_.notify_one();
  }
  void yield_current(std::coroutine_handle<> handle) override { schedule(handle); }
  void adopt(root_base&) override {
    throw std::logic_error("corio::spawn: no event loop or runtime runs on this thread (it is in sync_wait)");
  }
  void forget(root_base&) noexcept override {}
  bool attach(root_base&) noexcept override { return false; }
  void report_unhandled(std::exception_ptr failure) noexcept override { print_unhandled_exception(std::move(failure)); }
  std::shared_ptr<const failure_sink> unhandled_sink() const noexcept override { return nullptr; }

  /// The driver coroutine reached its end (on whichever thread completed the chain).
  void finish() {
    std::lock_guard lock(mutex_);
    done_ = true;
    wake_.notify_one();
  }

  /// Resumes what is queued here until finish().
  void run_until_done() {
    drain([this](std::unique_lock<std::mutex>& lock, auto woken) {
      wake_.wait(lock, woken);
      return true;
    });
  }
  /// The same, but false if `deadline` passed first.
  template <class Clock, class Duration>
  bool run_until_done(std::chrono::time_point<Clock, Duration> deadline) {
    return drain([&](std::unique_lock<std::mutex>& lock, auto woken) { return wake_.wait_until(lock, deadline, woken); });
  }

  /// Installs this as the thread's current_sync_wait for a scope (nested sync_waits restore the outer).
  class installed {
   public:
    explicit installed(sync_wait_executor& driver) noexcept : outer_(std::exchange(current_sync_wait, &driver)) {}
    ~installed() { current_sync_wait = outer_; }
    installed(const installed&) = delete;
    installed& operator=(const installed&) = delete;

   private:
    executor* outer_;
  };

 private:
  template <class Wait>
  bool drain(Wait wait) {
    std::unique_lock lock(mutex_);
    for (;;) {
      if (!wait(lock, [this] { return done_ || !ready_.empty(); })) {
        return false;
      }
      if (ready_.empty()) {
        return true;
      }
      std::vector<std::coroutine_handle<>> batch;
      batch.swap(ready_);
      lock.unlock();
      for (std::coroutine_handle<> handle : batch) {
        resume_top(handle);
      }
      lock.lock();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<std::coroutine_handle<>> ready_;
  bool done_ = false;
};

template <class T>
class sync_wait_driver;

struct signal_on_final_suspend {
  bool await_ready() const noexcept { return false; }
  template <class Promise>
  void await_suspend(std::coroutine_handle<Promise> self) const noexcept {
    self.promise().driver_->finish();
  }
  void await_resume() const noexcept {}
};

template <class T>
struct sync_wait_promise_common : pooled_frame {
  sync_wait_executor* driver_ = nullptr;
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
    sync_wait_executor driver;
    handle_.promise().driver_ = &driver;
    {
      sync_wait_executor::installed here(driver);
      detail::resume_top(handle_);
      driver.run_until_done();
    }
    return handle_.promise().result_.take();
  }

  /// run(), calling `on_deadline` once if `deadline` passes first (to make the awaitable end, by a
  /// stop request), then waiting for it to end.
  template <class Clock, class Duration, class OnDeadline>
  T run_until(std::chrono::time_point<Clock, Duration> deadline, OnDeadline on_deadline) {
    sync_wait_executor driver;
    handle_.promise().driver_ = &driver;
    {
      sync_wait_executor::installed here(driver);
      detail::resume_top(handle_);
      if (!driver.run_until_done(deadline)) {
        on_deadline();
        driver.run_until_done();
      }
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

/// Runs `awaitable` on the calling thread and blocks the thread until it completes; returns its
/// result or rethrows its exception. What parks on this thread resumes on this thread, whoever wakes
/// it; only a hop (schedule_on) moves the rest of the chain to another executor's thread.
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
