#pragma once
// `mutex-vector`: evpp's original pending-functor list. Producers push_back under a std::mutex; the
// consumer swaps the whole vector out under the lock and runs it outside. The consumer busy-polls.

#include <functional>
#include <mutex>
#include <utility>
#include <vector>

namespace lab {

class mutex_vector_queue {
 public:
  template <class F>
  void post(F&& functor) {
    std::lock_guard lock(mutex_);
    pending_.emplace_back(std::forward<F>(functor));
  }

  void run() {
    std::vector<std::function<void()>> batch;
    while (!stopping_) {
      {
        std::lock_guard lock(mutex_);
        batch.swap(pending_);
      }
      for (auto& functor : batch) functor();
      batch.clear();
    }
  }

  void stop() { stopping_ = true; }

 private:
  std::mutex mutex_;
  std::vector<std::function<void()>> pending_;
  bool stopping_ = false;  // consumer thread only
};

}  // namespace lab
