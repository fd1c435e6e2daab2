#pragma once
// `boost-lockfree`: boost::lockfree::queue needs a trivially copyable element, so each post
// allocates a std::function on the heap and queues its pointer; the consumer runs and deletes it.
// The consumer busy-polls.

#include <boost/lockfree/queue.hpp>

#include <functional>
#include <utility>

namespace lab {

class boost_lockfree_queue {
 public:
  template <class F>
  void post(F&& functor) {
    auto* boxed = new std::function<void()>(std::forward<F>(functor));
    while (!queue_.push(boxed)) {
    }
  }

  void run() {
    std::function<void()>* boxed = nullptr;
    while (!stopping_) {
      if (queue_.pop(boxed)) {
        (*boxed)();
        delete boxed;
      }
    }
  }

  void stop() { stopping_ = true; }

 private:
  boost::lockfree::queue<std::function<void()>*> queue_{1024};
  bool stopping_ = false;  // consumer thread only
};

}  // namespace lab
