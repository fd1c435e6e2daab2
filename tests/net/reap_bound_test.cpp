// A worker takes from its reactor no more completions than its local run queue has room for
// (io_slot.hpp, "Reap bound"); the rest stay in the kernel until a later turn. These check that
// nothing left there is lost or starved, on both backends: more connections ready at once than the
// queue holds all get their echoes, and I/O still completes while tasks that keep yielding hold the
// one worker's queue full. The epoll backend takes at most 64 events per turn besides
// (epoll_reactor.cpp, "Turn size"), so the first test also drains its ready sockets over several turns.
#include <corio/errors.hpp>
#include <corio/join_handle.hpp>
#include <corio/net/tcp_listener.hpp>
#include <corio/net/tcp_stream.hpp>
#include <corio/runtime.hpp>
#include <corio/time.hpp>
#include <corio/yield.hpp>

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "support/net.hpp"

using namespace std::chrono_literals;

namespace {

using corio::net::endpoint;
using corio::net::tcp_listener;
using corio::net::tcp_stream;
using namespace corio::test;

// A worker's local queue holds this many tasks (worker.hpp, queue_capacity).
constexpr int local_queue_capacity = 256;
// More than it holds; each connection takes two descriptors in this process.
constexpr int connections = local_queue_capacity + 100;
constexpr rlim_t descriptors_needed = 2 * connections + 100;

template <class Backend>
class reap_bound : public backend_test<Backend> {
 protected:
  void SetUp() override {
    backend_test<Backend>::SetUp();
    ASSERT_TRUE(limit_.raised()) << "cannot raise RLIMIT_NOFILE to " << descriptors_needed;
  }

  descriptor_limit limit_{descriptors_needed};
};
TYPED_TEST_SUITE(reap_bound, both_backends, backend_names);

corio::task<int> echo_each(std::vector<tcp_stream>& clients) {
  std::vector<corio::join_handle<std::string>> replies;
  for (int i = 0; i < connections; ++i) {
    replies.push_back(corio::spawn(round_trip(clients[static_cast<std::size_t>(i)], "message " + std::to_string(i))));
  }
  int good = 0;
  for (int i = 0; i < connections; ++i) {
    good += co_await std::move(replies[static_cast<std::size_t>(i)]) == "message " + std::to_string(i) ? 1 : 0;
  }
  co_return good;
}

TYPED_TEST(reap_bound, more_connections_ready_at_once_than_the_queue_holds_all_get_their_echo) {
  corio::runtime rt(runtime_options(TestFixture::backend, 1));
  int good = rt.block_on([]() -> corio::task<int> {
    auto listener = tcp_listener::bind(endpoint::loopback_v4(0));
    std::vector<tcp_stream> clients;
    std::vector<corio::join_handle<void>> servers;
    for (int i = 0; i < connections; ++i) {
      clients.push_back(co_await tcp_stream::connect(listener.local_endpoint()));
      servers.push_back(corio::spawn(echo_connection(co_await listener.accept())));
    }
    // Twice: the first round has every server read waiting at once, the second every client read.
    int good = co_await corio::with_timeout(20s, echo_each(clients));
    good += co_await corio::with_timeout(20s, echo_each(clients));
    clients.clear();  // each server sees EOF and ends
    for (auto& each : servers) {
      co_await std::move(each);
    }
    co_return good;
  }());
  EXPECT_EQ(good, 2 * connections);
}

corio::task<void> yield_until(const std::atomic<bool>& done) {
  while (!done.load(std::memory_order_relaxed)) {
    co_await corio::yield();
  }
}

corio::task<int> echo_rounds(int rounds) {
  auto [client, server] = co_await connected_pair();
  auto echoing = corio::spawn(echo_connection(std::move(server)));
  int good = 0;
  for (int i = 0; i < rounds; ++i) {
    good += co_await round_trip(client, "round " + std::to_string(i)) == "round " + std::to_string(i) ? 1 : 0;
  }
  client.close();
  co_await std::move(echoing);
  co_return good;
}

TYPED_TEST(reap_bound, io_completes_while_yielding_tasks_keep_the_worker_queue_full) {
  corio::runtime rt(runtime_options(TestFixture::backend, 1));
  constexpr int rounds = 50;
  int good = rt.block_on([]() -> corio::task<int> {
    std::atomic<bool> done{false};
    std::vector<corio::join_handle<void>> yielders;
    for (int i = 0; i < local_queue_capacity; ++i) {  // it stays exactly full
      yielders.push_back(corio::spawn(yield_until(done)));
    }
    int good = 0;
    try {
      good = co_await corio::with_timeout(20s, echo_rounds(rounds));
    } catch (const corio::timed_out&) {
      good = -1;  // I/O was held back behind the yielders
    }
    done.store(true, std::memory_order_relaxed);
    for (auto& each : yielders) {
      co_await std::move(each);
    }
    co_return good;
  }());
  EXPECT_EQ(good, rounds);
}

}  // namespace
