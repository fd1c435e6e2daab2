// The blocking-call thread pool; the design note is in include/corio/detail/blocking_pool.hpp.
#include <corio/detail/blocking_pool.hpp>

#include <algorithm>

namespace corio::detail {

blocking_pool::blocking_pool(std::size_t max_threads, std::chrono::milliseconds keep_alive)
    : max_threads_(max_threads == 0 ? 1 : max_threads), keep_alive_(keep_alive) {}

blocking_pool::~blocking_pool() { shutdown(); }

bool blocking_pool::submit(job work) {
  std::lock_guard lock(mutex_);
  if (stopping_) {
    return false;
  }
  jobs_.push_back(work);
  if (idle_ != 0) {
    --idle_;  // that thread is spoken for: a second job before it wakes starts another (see "Idle")
    ++notified_;
    work_ready_.notify_one();
  } else if (live_ < max_threads_) {
    // Join threads that already left on keep-alive before adding another.
    std::erase_if(threads_, [this](std::thread& thread) {
      auto gone = std::find(exited_.begin(), exited_.end(), thread.get_id());
      if (gone == exited_.end()) {
        return false;
      }
      exited_.erase(gone);
      thread.join();  // it has returned from thread_main (or is about to): a short wait at most
      return true;
    });
    try {
      threads_.emplace_back([this] { thread_main(); });  // it waits for this lock before it looks
    } catch (...) {
      if (live_ != 0) {
        return true;  // no new thread (EAGAIN): a busy one takes the job when its call returns
      }
      jobs_.pop_back();  // nobody would ever run it, and the caller frees what it points to
      throw;
    }
    ++live_;
  } else {
    work_ready_.notify_one();  // all busy; a thread whose wake-up lost its job to a busy one waits uncounted
  }
  return true;
}

namespace {
thread_local constinit const blocking_pool* this_threads_pool = nullptr;
}  // namespace

bool blocking_pool::runs_this_thread() const noexcept { return this_threads_pool == this; }

void blocking_pool::thread_main() {
  this_threads_pool = this;
  std::unique_lock lock(mutex_);
  for (;;) {
    if (!jobs_.empty()) {
      job work = jobs_.front();
      jobs_.pop_front();
      lock.unlock();
      work.run(work.context, true);
      lock.lock();
      continue;
    }
    if (stopping_) {
      break;
    }
    ++idle_;
    bool woke = work_ready_.wait_for(lock, keep_alive_, [this] { return stopping_ || !jobs_.empty(); });
    if (notified_ != 0) {
      --notified_;  // a submit already took this thread off the idle count
    } else {
      --idle_;
    }
    if (!woke) {
      break;  // idle for keep_alive: leave
    }
  }
  --live_;
  exited_.push_back(std::this_thread::get_id());
}

void blocking_pool::shutdown() noexcept {
  std::vector<std::thread> threads;
  std::deque<job> dropped;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    dropped.swap(jobs_);
    threads.swap(threads_);
  }
  work_ready_.notify_all();
  for (const job& work : dropped) {
    work.run(work.context, false);
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
}

std::size_t blocking_pool::thread_count() const {
  std::lock_guard lock(mutex_);
  return live_;
}

}  // namespace corio::detail
