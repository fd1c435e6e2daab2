#pragma once
// `mutex-vector`: evpp's original pending-functor list. Producers push_back under a std::mutex; the
// consumer swaps the whole vector out under the lock and runs it outside (evpp's DoPendingFunctors).
// A store for the consumers of consumers.hpp: push() from any thread, run_pending() on the consumer.

#include <functional>
#include <mutex>
#include <utility>
#include <vector>

namespace lab {

class mutex_vector_store {
 public:
  template <class F>
  void push(F&& functor) {
    std::lock_guard lock(mutex_);
    pending_.emplace_back(std::forward<F>(functor));
  }

  /// One swap: runs every functor pushed before it took the lock.
  void run_pending() {
    {
      std::lock_guard lock(mutex_);
      batch_.swap(pending_);
    }
    for (auto& functor : batch_) functor();
    batch_.clear();
  }

 private:
  std::mutex mutex_;
  std::vector<std::function<void()>> pending_;
  std::vector<std::function<void()>> batch_;  // consumer thread only; keeps its capacity between swaps
};

}  // namespace lab
