// Stress: seeded rounds of random networking scenarios (net_stress.hpp) on every io_uring path and on
// epoll. Each round must keep every byte, end every operation with a documented result, and leave no
// descriptor open; a round that takes more than a minute is a hang: the watchdog prints the round,
// its scenario and what has not ended, and aborts. Its first version (a program run by hand) found a
// connection leaked by an accept that completed as its loop was destroyed (single-shot accepts; this
// test catches that one within its default rounds when the fix is taken out) and a new connection's
// first bytes read by a closed stream's multishot recv (a registered-file slot reused too soon: a
// narrow window, seen in 7 of 40 runs of one seed, which close_under_operation_test now holds
// deterministically). Its reads raced against sleeps in when_any first lost bytes on two-worker
// runtimes through a task of the test's own around each read (when_any drops a task operand that
// finished as another won: README, Limitations; the races now use the read, or with_timeout around it,
// as their operand); the same window in read_exact, whose reading is a task, is closed
// (detail/read_exact_awaiter.hpp) and held by cancel_safe_read_test.
//
// CORIO_STRESS_SEED replaces the fixed seeds, CORIO_STRESS_ROUNDS the number of rounds (default 150), and
// CORIO_STRESS_FIRST_ROUND starts there (a round's scenario depends on the seed and its number only, so
// a failure's round reruns alone).
#include <dirent.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include "stress/net/net_stress.hpp"
#include "support/net.hpp"

namespace {

using namespace corio::test;
using corio::stress::failure_log;
using corio::stress::random;

constexpr auto a_round_hangs_after = std::chrono::seconds(60);

int open_descriptors() {
  int count = 0;
  DIR* listing = ::opendir("/proc/self/fd");
  while (dirent* each = ::readdir(listing)) {
    count += each->d_name[0] != '.';
  }
  ::closedir(listing);
  return count - 1;  // the listing's own
}

std::string descriptor_list() {
  std::string text;
  DIR* listing = ::opendir("/proc/self/fd");
  while (dirent* each = ::readdir(listing)) {
    char path[300];
    char target[300];
    std::snprintf(path, sizeof path, "/proc/self/fd/%s", each->d_name);
    ssize_t length = ::readlink(path, target, sizeof target - 1);
    if (length > 0) {
      text += std::string(each->d_name) + " -> " + std::string(target, static_cast<std::size_t>(length)) + "\n";
    }
  }
  ::closedir(listing);
  return text;
}

std::uint64_t environment_number(const char* name, std::uint64_t fallback) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::strtoull(value, nullptr, 0) : fallback;
}

/// Aborts the process, after printing the round and its state, if a round runs past its limit.
class watchdog {
 public:
  explicit watchdog(const failure_log& log) : log_(log), thread_([this] { watch(); }) {}
  ~watchdog() {
    {
      std::lock_guard lock(mutex_);
      over_ = true;
    }
    changed_.notify_one();
    thread_.join();
  }
  void round_began() {
    std::lock_guard lock(mutex_);
    began_ = std::chrono::steady_clock::now();
  }

 private:
  void watch() {
    std::unique_lock lock(mutex_);
    while (!over_) {
      if (changed_.wait_for(lock, std::chrono::milliseconds(200), [this] { return over_; })) {
        return;
      }
      if (std::chrono::steady_clock::now() - began_ > a_round_hangs_after) {
        std::fprintf(stderr, "HANG: %s\n", log_.current().c_str());
        std::abort();
      }
    }
  }

  const failure_log& log_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool over_ = false;
  std::chrono::steady_clock::time_point began_ = std::chrono::steady_clock::now();
  std::thread thread_;
};

void run_rounds(corio::io_backend backend, std::uint64_t seed, int first_round, int rounds) {
  std::signal(SIGPIPE, SIG_IGN);
  failure_log log;
  watchdog guard(log);
  const int descriptors_before = open_descriptors();
  int descriptors_allowed = descriptors_before;
  for (int round = first_round; round < first_round + rounds; ++round) {
    random choices(seed * 0x2545F4914F6CDD1Dull + static_cast<std::uint64_t>(round));
    auto kind = choices.below(10);
    log.begin_round(seed, round, kind < 7 ? "tcp" : kind < 9 ? "udp" : "listener");
    guard.round_began();
    try {
      if (kind < 7) {
        corio::stress::tcp_round(choices, backend, log);
      } else if (kind < 9) {
        corio::stress::udp_round(choices, backend, log);
      } else {
        corio::stress::listener_round(choices, backend, log);
      }
    } catch (const std::exception& error) {
      log.fail("the round threw %s", error.what());
    }
    // A socket handed to another thread's reactor is closed at its next turn; give that a moment.
    if (open_descriptors() > descriptors_allowed) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (int now = open_descriptors(); now > descriptors_allowed) {
      log.fail("%d descriptors open after the round, %d before the first:\n%s", now, descriptors_before,
               descriptor_list().c_str());
      descriptors_allowed = now;  // each leak once
    }
  }
  for (const std::string& failure : log.failures()) {
    ADD_FAILURE() << failure;
  }
}

template <class Backend>
class net_stress : public backend_test<Backend> {};
using every_path = ::testing::Types<uring_backend, uring_multishot_backend, uring_single_shot_backend, epoll_backend>;
TYPED_TEST_SUITE(net_stress, every_path, backend_names);

TYPED_TEST(net_stress, seeded_rounds_keep_every_byte_end_every_operation_and_leave_no_descriptor) {
  std::uint64_t path_seed = 20261129;  // each path its own default seed: the four explore different scenarios
  for (char letter : backend_names::GetName<TypeParam>(0)) {
    path_seed = path_seed * 31 + static_cast<unsigned char>(letter);
  }
  std::uint64_t seed = environment_number("CORIO_STRESS_SEED", path_seed);
  int first_round = static_cast<int>(environment_number("CORIO_STRESS_FIRST_ROUND", 0));
  int rounds = static_cast<int>(environment_number("CORIO_STRESS_ROUNDS", 150));
  run_rounds(TestFixture::backend, seed, first_round, rounds);
}

}  // namespace
