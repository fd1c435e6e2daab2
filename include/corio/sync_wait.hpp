#pragma once
// corio::sync_wait: run an awaitable to completion from ordinary (non-coroutine) code.
#include <chrono>
#include <condition_variable>
#include <coroutine>
#include <exception>
#include <mutex>
#include <new>
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

// A thread blocked in sync_wait, as the executor of the chains it drives.
// Design note.
// - Who: one object per thread that ever blocked in sync_wait, taken from a process-wide pool at its
//   first sync_wait and given back when the thread exits; never freed (a coroutine that parked
//   while a sync_wait ran may be woken long after: see the last point).
// - While a sync_wait runs on the thread (depth_ > 0) this is current_sync_wait, so a coroutine that
//   parks on the thread records it as its owner (current_owner()), and whoever wakes it, on any
//   thread, queues it here; the blocked thread resumes it. So a chain sync_wait drives never runs on
//   its waker's thread (it used to be resumed inline there: inside a runtime task's send, and then
//   with that worker as its owner, freed with its runtime).
// - Nested sync_waits on one thread (a blocking call made by the chain) share the one queue, each
//   with its own `done` flag: the innermost resumes everything queued, the outer chains' coroutines
//   too, so an inner wait that depends on one of them completes.
// - With no sync_wait running (depth_ 0), try_schedule() refuses, and the waker resumes the coroutine
//   inline, as it does any coroutine with no owner: one resumed by hand that parked during a sync_wait
//   and outlived it (a foreign coroutine type) is not stranded in a queue nobody drains. One woken as
//   the last sync_wait finishes is resumed by that sync_wait before it returns.
// - Out of memory for the queue, try_schedule() refuses too (inline resumption on the waker's thread,
//   as before this queue existed) rather than terminate the process from a noexcept wake-up.
// - It is not `current_executor`: the thread stays a plain one (it may block, it has no timers and
//   owns no tasks), so the members other than the queue refuse or do nothing.
// Threads: try_schedule(), schedule() and finish() from any thread, under the mutex, so a blocked
// sync_wait cannot return (its `done` flag is on its stack) while one of them still touches it;
// levels and run_until() on the owning thread only.
class blocked_thread final : public executor {
 public:
  /// The calling thread's.
  static blocked_thread& here();

  bool try_schedule(std::coroutine_handle<> handle) noexcept override {
    std::lock_guard lock(mutex_);
    if (depth_ == 0) {
      return false;
    }
    try {
      ready_.push_back(handle);  // a handful at most: one per branch of the chains parked here
    } catch (const std::bad_alloc&) {
      return false;  // out of memory: the waker resumes it inline, as it would with no sync_wait running
    }
    wake_.notify_one();
    return true;
  }
  void schedule(std::coroutine_handle<> handle) noexcept override {
    if (!try_schedule(handle)) {
      resume_top(handle);
    }
  }
  void yield_current(std::coroutine_handle<> handle) override { schedule(handle); }
  void adopt(root_base&) override {
    throw std::logic_error("corio::spawn: no event loop or runtime runs on this thread (it is in sync_wait)");
  }
  void forget(root_base&) noexcept override {}
  bool attach(root_base&) noexcept override { return false; }
  void report_unhandled(std::exception_ptr failure) noexcept override { print_unhandled_exception(std::move(failure)); }
  std::shared_ptr<const failure_sink> unhandled_sink() const noexcept override { return nullptr; }

  /// Any thread: the chain of one of this thread's sync_waits ended.
  void finish(bool& done) {
    std::lock_guard lock(mutex_);
    done = true;
    wake_.notify_one();
  }

  /// Resumes what is queued here until `done` (finish()).
  void run_until(const bool& done) {
    drain(done, [this](std::unique_lock<std::mutex>& lock, auto woken) {
      wake_.wait(lock, woken);
      return true;
    });
  }
  /// The same, but false if `deadline` passed first.
  template <class Clock, class Duration>
  bool run_until(const bool& done, std::chrono::time_point<Clock, Duration> deadline) {
    return drain(done, [&](std::unique_lock<std::mutex>& lock, auto woken) { return wake_.wait_until(lock, deadline, woken); });
  }

  /// One sync_wait on this thread, for its duration.
  class level {
   public:
    explicit level(blocked_thread& thread) : thread_(thread), outer_(current_sync_wait) {
      std::lock_guard lock(thread_.mutex_);
      ++thread_.depth_;
      current_sync_wait = &thread_;
    }
    /// The outermost one's end resumes what is still queued here (coroutines of no chain it drove,
    /// woken as it finished), inline, as try_schedule() would have had them resumed from now on.
    ~level() {
      std::vector<std::coroutine_handle<>> left;
      {
        std::lock_guard lock(thread_.mutex_);
        if (--thread_.depth_ == 0) {
          left.swap(thread_.ready_);
        }
        current_sync_wait = outer_;
      }
      for (std::coroutine_handle<> handle : left) {
        resume_top(handle);
      }
    }
    level(const level&) = delete;
    level& operator=(const level&) = delete;

   private:
    blocked_thread& thread_;
    executor* outer_;
  };

 private:
  template <class Wait>
  bool drain(const bool& done, Wait wait) {
    std::unique_lock lock(mutex_);
    for (;;) {
      if (!wait(lock, [&] { return done || !ready_.empty(); })) {
        return false;
      }
      if (done) {
        return true;  // what is left belongs to an enclosing sync_wait on this thread
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
  int depth_ = 0;
};

template <class T>
class sync_wait_driver;

struct signal_on_final_suspend {
  bool await_ready() const noexcept { return false; }
  template <class Promise>
  void await_suspend(std::coroutine_handle<Promise> self) const noexcept {
    self.promise().driver_->finish(*self.promise().done_);
  }
  void await_resume() const noexcept {}
};

template <class T>
struct sync_wait_promise_common : pooled_frame {
  blocked_thread* driver_ = nullptr;
  bool* done_ = nullptr;  // on the blocked sync_wait's stack
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
    return drive([](blocked_thread& thread, const bool& done) { thread.run_until(done); });
  }

  /// run(), calling `on_deadline` once if `deadline` passes first (to make the awaitable end, by a
  /// stop request), then waiting for it to end.
  template <class Clock, class Duration, class OnDeadline>
  T run_until(std::chrono::time_point<Clock, Duration> deadline, OnDeadline on_deadline) {
    return drive([&](blocked_thread& thread, const bool& done) {
      if (!thread.run_until(done, deadline)) {
        on_deadline();
        thread.run_until(done);
      }
    });
  }

 private:
  // Starts the awaitable on this thread, then lets `wait` run the thread's queue until it is done.
  template <class Wait>
  T drive(Wait wait) {
    blocked_thread& thread = blocked_thread::here();
    bool done = false;
    handle_.promise().driver_ = &thread;
    handle_.promise().done_ = &done;
    {
      blocked_thread::level waiting(thread);
      detail::resume_top(handle_);
      wait(thread, done);
    }
    return handle_.promise().result_.take();
  }

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
