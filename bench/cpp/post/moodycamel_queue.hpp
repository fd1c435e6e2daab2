#pragma once
// `moodycamel` and `moodycamel-bulk`: moodycamel::ConcurrentQueue of std::function, enqueued without
// producer tokens (as evpp does). The consumer busy-polls, either one try_dequeue at a time (evpp's
// use) or try_dequeue_bulk into a local array (the queue's strongest use).

#include <concurrentqueue/concurrentqueue.h>

#include <array>
#include <cstddef>
#include <functional>
#include <utility>

namespace lab {

template <bool Bulk>
class moodycamel_queue {
 public:
  static constexpr std::size_t bulk_size = 256;

  template <class F>
  void post(F&& functor) {
    queue_.enqueue(std::function<void()>(std::forward<F>(functor)));
  }

  void run() {
    if constexpr (Bulk) {
      std::array<std::function<void()>, bulk_size> batch;
      while (!stopping_) {
        const std::size_t count = queue_.try_dequeue_bulk(batch.begin(), batch.size());
        for (std::size_t i = 0; i < count; ++i) batch[i]();
      }
    } else {
      std::function<void()> functor;
      while (!stopping_) {
        if (queue_.try_dequeue(functor)) functor();
      }
    }
  }

  void stop() { stopping_ = true; }

 private:
  moodycamel::ConcurrentQueue<std::function<void()>> queue_;
  bool stopping_ = false;  // consumer thread only
};

}  // namespace lab
