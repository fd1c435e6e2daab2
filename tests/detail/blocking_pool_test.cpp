// The blocking pool's thread accounting (include/corio/detail/blocking_pool.hpp, "Idle").
#include <corio/detail/blocking_pool.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

namespace {

using namespace std::chrono_literals;

// Jobs that each wait (up to a bound) until `expected` of them are running at once.
struct rendezvous {
  std::mutex mutex;
  std::condition_variable changed;
  int arrived = 0;
  int expected = 0;
  int met = 0;  // jobs that saw all the others arrive
  int finished = 0;

  static void run(void* context, bool execute) noexcept {
    auto& self = *static_cast<rendezvous*>(context);
    std::unique_lock lock(self.mutex);
    if (execute) {
      ++self.arrived;
      self.changed.notify_all();
      if (self.changed.wait_for(lock, 5s, [&] { return self.arrived >= self.expected; })) {
        ++self.met;
      }
    }
    ++self.finished;
    self.changed.notify_all();
  }

  void wait_finished(int count) {
    std::unique_lock lock(mutex);
    changed.wait_for(lock, 10s, [&] { return finished >= count; });
  }
};

TEST(blocking_pool, jobs_submitted_before_an_idle_thread_wakes_start_threads_of_their_own) {
  corio::detail::blocking_pool pool(4, 10s);
  rendezvous warm_up;
  warm_up.expected = 1;
  ASSERT_TRUE(pool.submit({&warm_up, &rendezvous::run}));
  warm_up.wait_finished(1);
  std::this_thread::sleep_for(50ms);  // the one thread goes back to waiting: idle
  ASSERT_EQ(pool.thread_count(), 1u);

  rendezvous pair;
  pair.expected = 2;
  ASSERT_TRUE(pool.submit({&pair, &rendezvous::run}));
  ASSERT_TRUE(pool.submit({&pair, &rendezvous::run}));
  pair.wait_finished(2);
  EXPECT_EQ(pair.met, 2) << "the second job queued behind the first on the one idle thread";
  EXPECT_EQ(pool.thread_count(), 2u);
}

}  // namespace
