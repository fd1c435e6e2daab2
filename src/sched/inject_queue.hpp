#pragma once
// The runtime's global injection queue: where work from outside the workers (other threads, timers
// fired during shutdown, a full local queue's overflow) waits for a worker to take it.
// A mutex-protected deque, as in tokio and Go: it is off the hot path (workers prefer their local
// queues and look here every 61 ticks or when idle). `length_` mirrors the size for lock-free peeks;
// it is written under the mutex and read seq_cst by the parking protocol (see idle.hpp).
// Threads: every member is thread-safe.
#include <atomic>
#include <cstddef>
#include <deque>
#include <mutex>

namespace corio::detail {

class inject_queue {
 public:
  void push(void* item) {
    std::lock_guard lock(mutex_);
    items_.push_back(item);
    length_.store(items_.size(), std::memory_order_seq_cst);
  }

  void push_batch(void* const* items, std::size_t count) {
    std::lock_guard lock(mutex_);
    items_.insert(items_.end(), items, items + count);
    length_.store(items_.size(), std::memory_order_seq_cst);
  }

  /// Removes up to `max` items into `out`; returns how many.
  std::size_t pop_batch(void** out, std::size_t max) {
    if (length_.load(std::memory_order_seq_cst) == 0) {
      return 0;
    }
    std::lock_guard lock(mutex_);
    std::size_t count = 0;
    for (; count < max && !items_.empty(); ++count) {
      out[count] = items_.front();
      items_.pop_front();
    }
    length_.store(items_.size(), std::memory_order_seq_cst);
    return count;
  }

  bool empty() const noexcept { return length_.load(std::memory_order_seq_cst) == 0; }
  std::size_t size() const noexcept { return length_.load(std::memory_order_seq_cst); }

  void clear() {
    std::lock_guard lock(mutex_);
    items_.clear();
    length_.store(0, std::memory_order_seq_cst);
  }

 private:
  std::mutex mutex_;
  std::deque<void*> items_;
  std::atomic<std::size_t> length_{0};
};

}  // namespace corio::detail
