#pragma once
// `moodycamel` and `moodycamel-bulk`: moodycamel::ConcurrentQueue of std::function, enqueued without
// producer tokens (as evpp does). The consumer takes either one try_dequeue at a time (evpp's use) or
// try_dequeue_bulk into a local array (the queue's strongest use).
// A store for the consumers of consumers.hpp: push() from any thread, run_pending() on the consumer.

#include <concurrentqueue/concurrentqueue.h>

#include <array>
#include <cstddef>
#include <functional>
#include <utility>

namespace lab {

template <bool Bulk>
class moodycamel_store {
 public:
  static constexpr std::size_t bulk_size = 256;

  template <class F>
  void push(F&& functor) {
    queue_.enqueue(std::function<void()>(std::forward<F>(functor)));
  }

  /// Dequeues and runs functors until the queue looks empty.
  void run_pending() {
    if constexpr (Bulk) {
      while (const std::size_t count = queue_.try_dequeue_bulk(batch_.begin(), batch_.size())) {
        for (std::size_t i = 0; i < count; ++i) batch_[i]();
      }
    } else {
      while (queue_.try_dequeue(functor_)) functor_();
    }
  }

 private:
  moodycamel::ConcurrentQueue<std::function<void()>> queue_;
  std::array<std::function<void()>, bulk_size> batch_;  // consumer thread only (bulk)
  std::function<void()> functor_;                        // consumer thread only (one at a time)
};

}  // namespace lab
