// Fan-out on the multi-thread runtime: spawn work on every core, join it, with a timeout and
// cooperative cancellation. Shows: runtime, block_on, spawn, join_handle, task_scope, with_timeout,
// sleep_for, semaphore.
#include <corio/runtime.hpp>
#include <corio/scope.hpp>
#include <corio/semaphore.hpp>
#include <corio/time.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>

using namespace std::chrono_literals;

corio::task<long> sum_to(long n) {
  long total = 0;
  for (long i = 1; i <= n; ++i) {
    total += i;
  }
  co_return total;
}

corio::task<void> limited_job(corio::semaphore& slots, std::atomic<int>& done) {
  co_await slots.acquire();  // at most 4 jobs sleep at once
  co_await corio::sleep_for(1ms);
  slots.release();
  done.fetch_add(1);
}

corio::task<int> run() {
  // Join handles: results come back in the order we await them.
  auto a = corio::spawn(sum_to(1000));
  auto b = corio::spawn(sum_to(2000));
  long sums = co_await a + co_await b;

  // A nursery: all children finish (or the first error cancels the rest) before join() returns.
  corio::semaphore slots(4);
  std::atomic<int> done{0};
  corio::task_scope scope;
  for (int i = 0; i < 32; ++i) {
    scope.spawn(limited_job(slots, done));
  }
  co_await scope.join();

  // A deadline: the slow operation is cancelled and corio::timed_out thrown.
  bool timed_out = false;
  try {
    co_await corio::with_timeout(10ms, corio::sleep_for(10s));
  } catch (const corio::timed_out&) {
    timed_out = true;
  }
  std::printf("sums=%ld jobs=%d timed_out=%d\n", sums, done.load(), timed_out);
  co_return sums == 500500 + 2001000 && done == 32 && timed_out ? 0 : 1;
}

int main() {
  corio::runtime rt;  // one worker per online CPU
  return rt.block_on(run());
}
