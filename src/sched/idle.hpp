#pragma once
// Which workers are asleep or searching, and the protocol that wakes them without lost wake-ups.
//
// Purpose: wake a sleeping worker only when new stealable work exists and nobody is already
// searching for it (a searching worker will find it), so that a busy runtime makes no futex calls.
// State: `sleepers_` (indices, guarded by mutex_) with its count `sleeping_`, and `searching_`, the
// number of workers looking for work to steal.
// The protocol (every access below is seq_cst, so they fall in one total order):
//   producer: publish work (seq_cst queue tail store), read searching_; if 0, read sleeping_; if > 0,
//             pop a sleeper, count it as searching, unpark it (a permit, so it cannot be lost).
//   sleeper:  add itself to sleepers_ (sleeping_ + 1), stop searching (searching_ - 1), THEN re-check
//             every queue; park only if all are empty.
//   If the producer read searching_ before the sleeper's decrement, the sleeper's later re-check sees
//   the work; if after, the producer also sees sleeping_ > 0 and wakes someone. Go's scheduler and
//   tokio's idle.rs rely on the same ordering.
// Why a worker was woken travels with the pop, under the same lock: a worker that finds it was
// popped learns in the same critical section whether it was counted as a searcher. (A first version
// passed that flag separately after the pop; a worker could read it too early, leave `searching_`
// counted forever, and from then on every producer skipped waking anyone: a lost wake-up that the
// 100k foreign-wake stress test found.)
// Threads: all members thread-safe.
// Rejected: waking a worker on every push (a futex syscall per spawn); lock-free sleeper stacks (the
// list is touched only on the slow path, and a mutex makes the pop-and-count step obviously atomic).
#include <atomic>
#include <cstddef>
#include <mutex>
#include <utility>
#include <vector>

namespace corio::detail {

class idle_workers {
 public:
  /// Why leave_sleep() found the worker gone from the sleeper list.
  enum class wake_reason : unsigned char { none, searching, plain };

  explicit idle_workers(std::size_t workers) : workers_(workers), reasons_(workers, wake_reason::none) {
    sleepers_.reserve(workers);
  }

  /// A worker out of local work asks to search (steal). At most half the workers search at once.
  bool try_begin_searching() noexcept {
    std::size_t current = searching_.load(std::memory_order_seq_cst);
    if (2 * current >= workers_ && current != 0) {
      return false;
    }
    searching_.fetch_add(1, std::memory_order_seq_cst);
    return true;
  }

  /// A searching worker found work. True if it was the last searcher (it should wake another, since
  /// where there was work there may be more).
  bool end_searching() noexcept { return searching_.fetch_sub(1, std::memory_order_seq_cst) == 1; }

  /// Step one of going to sleep; the caller must re-check every queue afterwards.
  void begin_sleep(std::size_t index, bool was_searching) {
    {
      std::lock_guard lock(mutex_);
      sleepers_.push_back(index);
      sleeping_.fetch_add(1, std::memory_order_seq_cst);
    }
    if (was_searching) {
      searching_.fetch_sub(1, std::memory_order_seq_cst);
    }
  }

  /// Leaves the sleeper list. Returns wake_reason::none if the worker was still listed (it removed
  /// itself), otherwise why a waker picked it: `searching` means it was counted as a searcher.
  wake_reason leave_sleep(std::size_t index) {
    std::lock_guard lock(mutex_);
    for (std::size_t i = 0; i < sleepers_.size(); ++i) {
      if (sleepers_[i] == index) {
        sleepers_[i] = sleepers_.back();
        sleepers_.pop_back();
        sleeping_.fetch_sub(1, std::memory_order_seq_cst);
        return wake_reason::none;
      }
    }
    return std::exchange(reasons_[index], wake_reason::none);
  }

  /// Producer side, after publishing stealable work. Returns the index of a worker to unpark, or -1.
  long pick_worker_to_wake() {
    if (searching_.load(std::memory_order_seq_cst) != 0 || sleeping_.load(std::memory_order_seq_cst) == 0) {
      return -1;
    }
    return pop_sleeper(true);
  }

  /// Picks any sleeper (shutdown), without counting it as a searcher. -1 if none.
  long pick_any_sleeper() {
    if (sleeping_.load(std::memory_order_seq_cst) == 0) {
      return -1;
    }
    return pop_sleeper(false);
  }

  std::size_t sleeping() const noexcept { return sleeping_.load(std::memory_order_seq_cst); }

 private:
  long pop_sleeper(bool as_searcher) {
    std::lock_guard lock(mutex_);
    if (sleepers_.empty()) {
      return -1;
    }
    std::size_t index = sleepers_.back();
    sleepers_.pop_back();
    sleeping_.fetch_sub(1, std::memory_order_seq_cst);
    reasons_[index] = as_searcher ? wake_reason::searching : wake_reason::plain;
    if (as_searcher) {
      searching_.fetch_add(1, std::memory_order_seq_cst);
    }
    return static_cast<long>(index);
  }

  const std::size_t workers_;
  std::mutex mutex_;
  std::vector<std::size_t> sleepers_;
  std::vector<wake_reason> reasons_;  // guarded by mutex_
  std::atomic<std::size_t> sleeping_{0};
  std::atomic<std::size_t> searching_{0};
};

}  // namespace corio::detail
