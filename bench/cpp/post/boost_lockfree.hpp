#pragma once
// `boost-lockfree`: boost::lockfree::queue needs a trivially copyable element, so each post
// allocates a std::function on the heap and queues its pointer; the consumer runs and deletes it.
// A store for the consumers of consumers.hpp: push() from any thread, run_pending() on the consumer.

#include <boost/lockfree/queue.hpp>

#include <functional>
#include <utility>

namespace lab {

class boost_lockfree_store {
 public:
  template <class F>
  void push(F&& functor) {
    auto* boxed = new std::function<void()>(std::forward<F>(functor));
    while (!queue_.push(boxed)) {
    }
  }

  /// Pops and runs functors until the queue is empty.
  void run_pending() {
    std::function<void()>* boxed = nullptr;
    while (queue_.pop(boxed)) {
      (*boxed)();
      delete boxed;
    }
  }

 private:
  boost::lockfree::queue<std::function<void()>*> queue_{1024};
};

}  // namespace lab
