#pragma once
// The two ways a peer's consumer thread waits for functors (bench/scenarios.md, experiment post), each
// wrapping a store (push() from any thread, run_pending() on the consumer) into the adapter the
// harness drives: post(f), run(), stop().
//
//   busy_polling<Store>  run() calls store.run_pending() again and again: it never sleeps, so no post
//                        ever pays a wake-up (the lab's original peers).
//   evpp_wake<Store>     evpp's EventLoop: the consumer sleeps on an eventfd; a producer pushes, then
//                        writes the eventfd only if a `notified` flag was clear, setting it; the
//                        consumer clears the flag before it runs what is pending.
//
// evpp_wake, no lost wake-up. The consumer blocks only in read(fd), and a push it misses must be
// followed by a write. Consumer: clear `notified` (seq_cst), fence, run_pending. Producer: push,
// fence, load `notified`. The two seq_cst fences order each side's store before its later load, so
// either run_pending sees the push, or the producer's load sees the cleared flag and writes the fd.
// evpp itself gets the producer-side order from the atomic pending-functor counter it increments
// after every push (a locked instruction); this peer keeps the order with the fence and leaves the
// counter, which only serves statistics, out. A flag set by another producer means that producer's
// write is still to come, and the consumer's clear happens after it reads that write.
//
// Threads: post() from any producer thread; run() and stop() on the consumer thread only (stop() is
// called by the last functor, from inside run()).

#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <utility>

#include "../common/check.hpp"

namespace lab {

template <class Store>
class busy_polling {
 public:
  template <class F>
  void post(F&& functor) {
    store_.push(std::forward<F>(functor));
  }

  void run() {
    while (!stopping_) store_.run_pending();
  }

  void stop() { stopping_ = true; }

 private:
  Store store_;
  bool stopping_ = false;  // consumer thread only
};

template <class Store>
class evpp_wake {
 public:
  evpp_wake() : fd_(::eventfd(0, EFD_CLOEXEC)) { expect(fd_ >= 0, "eventfd failed"); }
  evpp_wake(const evpp_wake&) = delete;
  evpp_wake& operator=(const evpp_wake&) = delete;
  ~evpp_wake() { ::close(fd_); }

  template <class F>
  void post(F&& functor) {
    store_.push(std::forward<F>(functor));
    std::atomic_thread_fence(std::memory_order_seq_cst);  // where evpp increments its pending counter
    if (!notified_.load(std::memory_order_seq_cst)) {
      notified_.store(true, std::memory_order_seq_cst);
      const std::uint64_t one = 1;
      expect(::write(fd_, &one, sizeof one) == sizeof one, "eventfd write failed");
    }
  }

  void run() {
    while (!stopping_) {
      sleep_until_notified();
      notified_.store(false, std::memory_order_seq_cst);
      std::atomic_thread_fence(std::memory_order_seq_cst);
      store_.run_pending();
    }
  }

  void stop() { stopping_ = true; }

 private:
  void sleep_until_notified() {
    std::uint64_t count = 0;
    ssize_t got = 0;
    while ((got = ::read(fd_, &count, sizeof count)) < 0 && errno == EINTR) {
    }
    expect(got == sizeof count, "eventfd read failed");
  }

  Store store_;
  int fd_;
  std::atomic<bool> notified_{false};
  bool stopping_ = false;  // consumer thread only
};

}  // namespace lab
