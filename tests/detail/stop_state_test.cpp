#include <corio/detail/stop_state.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

namespace {

using corio::detail::stop_callback;
using corio::detail::stop_state;

struct call {
  std::function<void()> body;
  void operator()() const noexcept { body(); }
};
using callback = stop_callback<call>;

TEST(stop_state, a_request_runs_every_registered_callback_once_on_the_requesting_thread) {
  stop_state state;
  std::vector<std::thread::id> ran;
  callback first(state, call{[&] { ran.push_back(std::this_thread::get_id()); }});
  callback second(state, call{[&] { ran.push_back(std::this_thread::get_id()); }});
  EXPECT_FALSE(state.stop_requested());
  EXPECT_TRUE(state.request_stop());
  EXPECT_TRUE(state.stop_requested());
  EXPECT_FALSE(state.request_stop());
  ASSERT_EQ(ran.size(), 2U);
  EXPECT_EQ(ran[0], std::this_thread::get_id());
  EXPECT_EQ(ran[1], std::this_thread::get_id());
}

TEST(stop_state, a_callback_registered_after_the_request_runs_in_its_constructor) {
  stop_state state;
  state.request_stop();
  int runs = 0;
  callback late(state, call{[&] { ++runs; }});
  EXPECT_EQ(runs, 1);
}

TEST(stop_state, a_removed_callback_never_runs) {
  stop_state state;
  int runs = 0;
  std::optional<callback> kept(std::in_place, state, call{[&] { runs += 1; }});
  std::optional<callback> removed(std::in_place, state, call{[&] { runs += 100; }});
  removed.reset();
  state.request_stop();
  EXPECT_EQ(runs, 1);
}

TEST(stop_state, a_callback_may_remove_a_later_one_destroy_itself_and_register_another) {
  stop_state state;
  std::vector<int> ran;
  std::optional<callback> self_destroying;
  std::optional<callback> victim;
  std::optional<callback> newcomer;
  // Registered last, run first (the list is last-in first-out; the order is not a promise, but this
  // test needs the remover to run before its victim).
  victim.emplace(state, call{[&] { ran.push_back(1); }});
  self_destroying.emplace(state, call{[&] {
                            ran.push_back(2);
                            victim.reset();
                            newcomer.emplace(state, call{[&] { ran.push_back(3); }});  // runs at once
                            self_destroying.reset();
                          }});
  state.request_stop();
  EXPECT_EQ(ran, (std::vector<int>{2, 3}));
  EXPECT_FALSE(self_destroying.has_value());
}

TEST(stop_state, never_stops_cannot_be_requested_and_ignores_callbacks) {
  stop_state& never = corio::detail::never_stops;
  EXPECT_FALSE(never.stop_possible());
  int runs = 0;
  callback ignored(never, call{[&] { ++runs; }});
  EXPECT_FALSE(never.request_stop());
  EXPECT_FALSE(never.stop_requested());
  EXPECT_EQ(runs, 0);
}

// The bug this file exists to prevent: a callback's destructor returning while the callback still
// runs on the requesting thread, so the frame it points into is freed under it. Each round, the
// owner removes its callback while another thread requests; a callback that started must have
// finished before the destructor returns (ASan would also see the heap object freed under it).
TEST(stop_state, removal_waits_for_a_callback_running_on_another_thread) {
  constexpr int rounds = 2000;
  for (int round = 0; round < rounds; ++round) {
    stop_state state;
    auto progress = std::make_unique<std::atomic<int>>(0);  // 1: started, 2: finished
    auto registration = std::make_unique<callback>(state, call{[p = progress.get()] {
                                                     p->store(1);
                                                     for (int spin = 0; spin < 50; ++spin) {
                                                       std::this_thread::yield();
                                                     }
                                                     p->store(2);
                                                   }});
    std::thread requester([&] { state.request_stop(); });
    if (round % 2 == 0) {
      std::this_thread::yield();
    }
    registration.reset();
    int seen = progress->load();
    EXPECT_TRUE(seen == 0 || seen == 2) << "round " << round << ": the callback was still running";
    requester.join();
    EXPECT_TRUE(progress->load() == 0 || progress->load() == 2);
  }
}

// Callbacks come and go on several threads while one thread requests: each ran exactly once or was
// removed before it could (as with std::stop_callback, removal may win over a request in progress),
// and one kept until request_stop() returned has run.
TEST(stop_state, registrations_racing_a_request_run_once_or_not_at_all) {
  constexpr int threads = 3;
  constexpr int per_thread = 3000;
  for (int round = 0; round < 5; ++round) {
    stop_state state;
    std::atomic<int> runs{0};
    std::atomic<int> expected_runs{0};
    std::atomic<bool> go{false};
    std::atomic<bool> request_returned{false};
    std::vector<std::thread> owners;
    for (int t = 0; t < threads; ++t) {
      owners.emplace_back([&] {
        while (!go.load()) {
          std::this_thread::yield();
        }
        for (int i = 0; i < per_thread; ++i) {
          std::atomic<int> mine{0};
          {
            callback registration(state, call{[&] {
                                    mine.fetch_add(1);
                                    runs.fetch_add(1);
                                  }});
          }
          EXPECT_LE(mine.load(), 1);
          expected_runs.fetch_add(mine.load());
        }
        std::atomic<int> last{0};
        {
          callback registration(state, call{[&] { last.fetch_add(1); }});
          while (!request_returned.load()) {
            std::this_thread::yield();
          }
        }
        EXPECT_EQ(last.load(), 1);
      });
    }
    go.store(true);
    std::this_thread::sleep_for(std::chrono::microseconds(200 * round));
    EXPECT_TRUE(state.request_stop());
    request_returned.store(true);
    for (auto& owner : owners) {
      owner.join();
    }
    EXPECT_EQ(runs.load(), expected_runs.load());
  }
}

}  // namespace
