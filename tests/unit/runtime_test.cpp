#include <corio/async_mutex.hpp>
#include <corio/event.hpp>
#include <corio/runtime.hpp>
#include <corio/task.hpp>
#include <corio/time.hpp>
#include <corio/when_all.hpp>
#include <corio/yield.hpp>

#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "support/lifetime.hpp"

using namespace std::chrono_literals;

namespace {

corio::task<int> square(int x) { co_return x * x; }

TEST(runtime, block_on_returns_the_value) {
  corio::runtime rt(corio::runtime::options{.workers = 2, .max_blocking_threads = 64});
  EXPECT_EQ(rt.block_on(square(9)), 81);
  EXPECT_EQ(rt.workers(), 2u);
}

TEST(runtime, block_on_takes_a_callable_and_keeps_its_captures_alive) {
  corio::runtime rt(corio::runtime::options{.workers = 2, .max_blocking_threads = 64});
  std::string word(40, 'w');  // past the small-string buffer: a dangling capture reads freed heap
  std::size_t length = rt.block_on([word]() -> corio::task<std::size_t> {
    co_await corio::yield();
    co_return word.size();
  });
  EXPECT_EQ(length, 40u);
}

TEST(runtime, block_on_rethrows_the_exception) {
  corio::runtime rt(corio::runtime::options{.workers = 2, .max_blocking_threads = 64});
  auto failing = []() -> corio::task<void> {
    co_await corio::yield();
    throw std::domain_error("bad");
  };
  EXPECT_THROW(rt.block_on(failing()), std::domain_error);
}

TEST(runtime, spawned_tasks_are_all_joined_with_their_results) {
  corio::runtime rt(corio::runtime::options{.workers = 2, .max_blocking_threads = 64});
  auto parent = []() -> corio::task<long> {
    std::vector<corio::join_handle<int>> handles;
    for (int i = 0; i < 10'000; ++i) {
      handles.push_back(corio::spawn(square(i % 100)));
    }
    long sum = 0;
    for (auto& handle : handles) {
      sum += co_await handle;
    }
    co_return sum;
  };
  long expected = 0;
  for (int i = 0; i < 10'000; ++i) {
    expected += (i % 100) * (i % 100);
  }
  EXPECT_EQ(rt.block_on(parent()), expected);
}

TEST(runtime, cpu_bound_fan_out_uses_more_than_one_worker) {
  corio::runtime rt(corio::runtime::options{.workers = 2, .max_blocking_threads = 64});
  std::mutex mutex;
  std::set<std::thread::id> threads;
  auto busy = [&]() -> corio::task<void> {
    {
      std::lock_guard lock(mutex);
      threads.insert(std::this_thread::get_id());
    }
    auto until = std::chrono::steady_clock::now() + 2ms;
    while (std::chrono::steady_clock::now() < until) {
    }
    co_return;
  };
  auto parent = [&]() -> corio::task<void> {
    std::vector<corio::join_handle<void>> handles;
    for (int i = 0; i < 200; ++i) {
      handles.push_back(corio::spawn(busy()));
    }
    for (auto& handle : handles) {
      co_await handle;
    }
  };
  rt.block_on(parent());
  EXPECT_EQ(threads.size(), 2u);
}

TEST(runtime, spawn_from_a_foreign_thread_runs_on_a_worker) {
  corio::runtime rt(corio::runtime::options{.workers = 2, .max_blocking_threads = 64});
  std::atomic<std::thread::id> ran_on{};
  auto body = [&]() -> corio::task<int> {
    ran_on = std::this_thread::get_id();
    co_return 5;
  };
  auto handle = rt.spawn(body());
  EXPECT_EQ(corio::sync_wait(std::move(handle)), 5);
  EXPECT_NE(ran_on.load(), std::this_thread::get_id());
}

TEST(runtime, block_on_inside_a_worker_throws_logic_error) {
  corio::runtime rt(corio::runtime::options{.workers = 1, .max_blocking_threads = 64});
  auto nested = [&]() -> corio::task<bool> {
    try {
      rt.block_on(square(2));
    } catch (const std::logic_error&) {
      co_return true;
    }
    co_return false;
  };
  EXPECT_TRUE(rt.block_on(nested()));
}

TEST(runtime, options_out_of_range_throw_invalid_argument) {
  EXPECT_THROW(corio::runtime(corio::runtime::options{.workers = corio::runtime::max_workers + 1}),
               std::invalid_argument);
  EXPECT_THROW(corio::runtime(corio::runtime::options{.workers = SIZE_MAX}), std::invalid_argument);
  EXPECT_THROW(corio::runtime(corio::runtime::options{.workers = 1, .max_blocking_threads = 0}),
               std::invalid_argument);
}

// It used to join the pool thread it ran on: std::terminate ("Resource deadlock avoided"), the way a
// runtime freed by a detached blocking call that held the last shared_ptr to it ended (a review).
TEST(runtime, shutdown_from_its_own_spawn_blocking_thread_throws_logic_error) {
  corio::runtime rt(corio::runtime::options{.workers = 1, .max_blocking_threads = 4});
  bool refused = rt.block_on([&]() -> corio::task<bool> {
    co_return co_await corio::spawn_blocking([&rt] {
      try {
        rt.shutdown();
      } catch (const std::logic_error&) {
        return true;
      }
      return false;
    });
  });
  EXPECT_TRUE(refused);
}

// A worker thread that cannot be started (here: address space for its stack) used to leave the
// constructor with joinable threads, which is std::terminate. Not under the sanitizers, whose shadow
// memory an address-space limit would starve.
TEST(runtime, a_worker_that_cannot_start_is_an_exception_and_the_others_are_joined) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "an address-space limit starves the sanitizer's shadow memory";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  GTEST_SKIP() << "an address-space limit starves the sanitizer's shadow memory";
#endif
#endif
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    rlimit limit{512ull << 20, 512ull << 20};  // room for a few dozen 8 MiB thread stacks
    ::setrlimit(RLIMIT_AS, &limit);
    try {
      corio::runtime rt(corio::runtime::options{.workers = 1000});
    } catch (const std::system_error& error) {
      ::_exit(std::string(error.what()).find("cannot start worker thread") != std::string::npos ? 0 : 2);
    } catch (...) {
      ::_exit(3);
    }
    ::_exit(4);  // every worker started: the limit did not bite
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died of signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(runtime, spawning_on_a_shut_down_runtime_throws_runtime_stopped) {
  corio::runtime rt(corio::runtime::options{.workers = 1, .max_blocking_threads = 64});
  rt.shutdown();
  EXPECT_THROW((void)rt.spawn(square(1)), corio::runtime_stopped);
  EXPECT_THROW(rt.block_on(square(1)), corio::runtime_stopped);
}

TEST(runtime, sleeping_tasks_wake_on_time_across_workers) {
  corio::runtime rt(corio::runtime::options{.workers = 2, .max_blocking_threads = 64});
  auto parent = []() -> corio::task<corio::clock::duration> {
    auto start = corio::clock::now();
    auto sleeper = []() -> corio::task<void> { co_await corio::sleep_for(20ms); };
    std::vector<corio::join_handle<void>> handles;
    for (int i = 0; i < 100; ++i) {
      handles.push_back(corio::spawn(sleeper()));
    }
    for (auto& handle : handles) {
      co_await handle;
    }
    co_return corio::clock::now() - start;
  };
  auto elapsed = rt.block_on(parent());
  EXPECT_GE(elapsed, 20ms);
  EXPECT_LT(elapsed, 5s);
}

TEST(runtime, cancelling_a_yielding_loop_stops_it) {
  corio::runtime rt(corio::runtime::options{.workers = 2, .max_blocking_threads = 64});
  auto parent = []() -> corio::task<bool> {
    auto spinner = []() -> corio::task<void> {
      for (;;) {
        co_await corio::yield();
      }
    };
    auto handle = corio::spawn(spinner());
    co_await corio::sleep_for(5ms);
    handle.cancel();
    try {
      co_await handle;
    } catch (const corio::cancelled&) {
      co_return true;
    }
    co_return false;
  };
  EXPECT_TRUE(rt.block_on(parent()));
}

// One worker: a task looping over always-ready awaits must not starve the task that would stop it.
TEST(runtime, coop_budget_lets_other_tasks_run_beside_a_task_that_never_suspends) {
  corio::runtime rt(corio::runtime::options{.workers = 1, .max_blocking_threads = 64});
  auto parent = []() -> corio::task<long> {
    std::atomic<bool> stop{false};
    auto ready = []() -> corio::task<int> { co_return 1; };
    auto spinner = [&]() -> corio::task<long> {
      long iterations = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        iterations += co_await ready();
      }
      co_return iterations;
    };
    auto stopper = [&]() -> corio::task<void> {
      stop = true;
      co_return;
    };
    auto spinning = corio::spawn(spinner());
    co_await corio::yield();  // the spinner starts first
    auto stopping = corio::spawn(stopper());
    co_await stopping;
    co_return co_await spinning;
  };
  EXPECT_GT(rt.block_on(parent()), 0);
}

TEST(runtime, coop_budget_also_covers_sync_waits_that_never_suspend) {
  corio::runtime rt(corio::runtime::options{.workers = 1, .max_blocking_threads = 4});
  auto parent = []() -> corio::task<long> {
    corio::event always_set;
    always_set.set();
    std::atomic<bool> stop{false};
    auto spinner = [&]() -> corio::task<long> {
      long iterations = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        co_await always_set.wait();
        ++iterations;
      }
      co_return iterations;
    };
    auto stopper = [&]() -> corio::task<void> {
      stop = true;
      co_return;
    };
    auto spinning = corio::spawn(spinner());
    co_await corio::yield();
    co_await corio::spawn(stopper());
    co_return co_await spinning;
  };
  EXPECT_GT(rt.block_on(parent()), 0);
}

TEST(runtime, spawn_blocking_runs_off_the_workers_and_returns_the_result) {
  corio::runtime rt(corio::runtime::options{.workers = 1, .max_blocking_threads = 64});
  auto parent = []() -> corio::task<bool> {
    std::thread::id worker = std::this_thread::get_id();
    std::thread::id blocking_thread = co_await corio::spawn_blocking([] {
      std::this_thread::sleep_for(5ms);
      return std::this_thread::get_id();
    });
    co_return blocking_thread != worker;
  };
  EXPECT_TRUE(rt.block_on(parent()));
}

TEST(runtime, spawn_blocking_propagates_exceptions) {
  corio::runtime rt(corio::runtime::options{.workers = 1, .max_blocking_threads = 64});
  auto parent = []() -> corio::task<void> {
    co_await corio::spawn_blocking([] { throw std::length_error("blocking failed"); });
  };
  EXPECT_THROW(rt.block_on(parent()), std::length_error);
}

TEST(runtime, blocking_calls_do_not_stall_the_worker) {
  corio::runtime rt(corio::runtime::options{.workers = 1, .max_blocking_threads = 4});
  auto parent = []() -> corio::task<int> {
    auto blocker = []() -> corio::task<void> {
      co_await corio::spawn_blocking([] { std::this_thread::sleep_for(200ms); });
    };
    auto quick = []() -> corio::task<int> {
      co_await corio::yield();
      co_return 1;
    };
    auto slow = corio::spawn(blocker());
    auto start = corio::clock::now();
    int value = co_await corio::spawn(quick());
    EXPECT_LT(corio::clock::now() - start, 150ms);  // ran while the blocking call was in progress
    co_await slow;
    co_return value;
  };
  EXPECT_EQ(rt.block_on(parent()), 1);
}

TEST(runtime, spawn_blocking_outside_a_runtime_throws_logic_error) {
  auto body = []() -> corio::task<void> { co_await corio::spawn_blocking([] {}); };
  EXPECT_THROW(corio::sync_wait(body()), std::logic_error);
}

TEST(runtime, detached_task_exception_reaches_the_unhandled_hook) {
  std::atomic<int> reported{0};
  {
    corio::runtime rt(corio::runtime::options{
        .workers = 1, .on_unhandled_exception = [&](std::exception_ptr) { reported.fetch_add(1); }});
    auto parent = []() -> corio::task<void> {
      auto failing = []() -> corio::task<void> {
        throw std::runtime_error("lost?");
        co_return;
      };
      corio::spawn(failing()).detach();
      co_await corio::sleep_for(10ms);
    };
    rt.block_on(parent());
  }
  EXPECT_EQ(reported.load(), 1);
}

namespace report_test {
struct disk_on_fire {};  // not derived from std::exception
}  // namespace report_test

// Without a hook, the report on stderr names what was thrown: its type, and what() for a
// std::exception (a user trial found "non-standard exception" alone useless for an int or a struct).
TEST(runtime, default_unhandled_report_names_the_exception_type) {
  testing::internal::CaptureStderr();
  {
    corio::runtime rt(corio::runtime::options{.workers = 1});
    auto parent = []() -> corio::task<void> {
      auto throws_struct = []() -> corio::task<void> {
        throw report_test::disk_on_fire{};
        co_return;
      };
      auto throws_std = []() -> corio::task<void> {
        throw std::out_of_range("slot 7");
        co_return;
      };
      corio::spawn(throws_struct()).detach();
      corio::spawn(throws_std()).detach();
      co_await corio::sleep_for(10ms);
    };
    rt.block_on(parent());
  }
  std::string report = testing::internal::GetCapturedStderr();
  EXPECT_NE(report.find("report_test::disk_on_fire (not derived from std::exception)\n"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("unhandled exception in a detached task: std::out_of_range: slot 7"), std::string::npos)
      << report;
}

TEST(runtime, shutdown_destroys_suspended_tasks_sleepers_and_their_frames) {
  corio::test::lifetime_counts counts;
  corio::async_mutex mutex;  // outlives the runtime: its waiters unlink from it during shutdown
  {
    corio::runtime rt(corio::runtime::options{.workers = 2, .max_blocking_threads = 64});
    auto sleeper = [](corio::test::counted) -> corio::task<void> { co_await corio::sleep_for(1h); };
    // Ignores cancellation by waiting on something that cannot be cancelled, over and over:
    // shutdown must give up on it after its grace period and still free it.
    auto stubborn = [](corio::test::counted) -> corio::task<void> {
      for (;;) {
        co_await corio::spawn_blocking([] { std::this_thread::sleep_for(20ms); });
      }
    };
    auto locker = [&mutex](corio::test::counted) -> corio::task<void> {
      auto guard = co_await mutex.lock();
      co_await corio::sleep_for(1h);  // the first holds the lock; the rest queue behind it
    };
    auto parent = [&]() -> corio::task<void> {
      for (int i = 0; i < 2000; ++i) {
        corio::spawn(sleeper(corio::test::counted(counts))).detach();
        corio::spawn(locker(corio::test::counted(counts))).detach();
      }
      corio::spawn(stubborn(corio::test::counted(counts))).detach();
      co_await corio::sleep_for(20ms);
    };
    rt.block_on(parent());
    EXPECT_GE(counts.alive.load(), 4001);
  }
  EXPECT_EQ(counts.alive.load(), 0);
}

long process_cpu_ticks() {
  std::ifstream stat("/proc/self/stat");
  std::string content((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  std::istringstream fields(content.substr(content.rfind(')') + 2));
  std::string field;
  long utime = 0;
  long stime = 0;
  for (int i = 3; i <= 15; ++i) {  // fields 14 and 15 are utime and stime
    fields >> field;
    if (i == 14) {
      utime = std::stol(field);
    } else if (i == 15) {
      stime = std::stol(field);
    }
  }
  return utime + stime;
}

TEST(runtime, idle_runtime_uses_almost_no_cpu) {
  corio::runtime rt(corio::runtime::options{.workers = 2, .max_blocking_threads = 64});
  rt.block_on(square(1));  // workers started and went idle
  std::this_thread::sleep_for(50ms);
  long before = process_cpu_ticks();
  std::this_thread::sleep_for(1s);
  long used = process_cpu_ticks() - before;
  // Clock ticks are 10 ms; two spinning workers would burn ~200 ticks in this second.
  EXPECT_LE(used, 5);
}

}  // namespace
