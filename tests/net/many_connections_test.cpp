// 10,000 concurrent connections held open and echoed on both backends. The clients run in a forked
// child process (a corio runtime of its own), so each process needs ~10,000 descriptors, not 20,000:
// the test raises RLIMIT_NOFILE to what it needs in each (a hard limit of 20,000 is common).
#include <corio/event.hpp>
#include <corio/join_handle.hpp>
#include <corio/net/tcp_listener.hpp>
#include <corio/net/tcp_stream.hpp>
#include <corio/runtime.hpp>
#include <corio/semaphore.hpp>

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <vector>

#include "support/net.hpp"

namespace {

using corio::net::endpoint;
using corio::net::tcp_listener;
using corio::net::tcp_stream;
using namespace corio::test;

constexpr int connections = 10'000;
constexpr rlim_t descriptors_needed = connections + 1'000;

template <class Backend>
class many_connections : public backend_test<Backend> {
 protected:
  void SetUp() override {
    backend_test<Backend>::SetUp();
    ASSERT_TRUE(limit_.raised()) << "cannot raise RLIMIT_NOFILE to " << descriptors_needed
                                 << " (needs that hard limit, or CAP_SYS_RESOURCE)";
  }

  descriptor_limit limit_{descriptors_needed};
};
TYPED_TEST_SUITE(many_connections, both_backends, backend_names);

corio::task<void> accept_and_echo(tcp_listener& listener, int count) {
  for (int i = 0; i < count; ++i) {
    corio::spawn(echo_connection(co_await listener.accept())).detach();
  }
}

// One client: connect (at most `connecting` at a time, so the accept queue never overflows and no
// SYN waits a second for its retransmission), echo once, hold the connection until every client is
// connected, echo again.
corio::task<int> client(endpoint server, int id, corio::semaphore& connecting, std::atomic<int>& connected,
                        corio::event& all_connected) {
  co_await connecting.acquire();
  tcp_stream stream = co_await tcp_stream::connect(server);
  connecting.release();
  std::string message = "hello from " + std::to_string(id);
  int good = co_await round_trip(stream, message) == message ? 1 : 0;
  if (connected.fetch_add(1) + 1 == connections) {
    all_connected.set();
  }
  co_await all_connected.wait();
  co_return good + (co_await round_trip(stream, message) == message ? 1 : 0);
}

// The child: 10,000 clients, all connected at once, each echoing twice. Exit status 0 if every echo
// came back whole.
[[noreturn]] void run_clients(corio::io_backend backend, endpoint server) {
  int good = 0;
  try {
    corio::runtime rt(runtime_options(backend));
    good = rt.block_on([](endpoint at) -> corio::task<int> {
      corio::semaphore connecting(256);
      std::atomic<int> connected{0};
      corio::event all_connected;
      std::vector<corio::join_handle<int>> clients;
      clients.reserve(connections);
      for (int i = 0; i < connections; ++i) {
        clients.push_back(corio::spawn(client(at, i, connecting, connected, all_connected)));
      }
      int total = 0;
      for (auto& each : clients) {
        total += co_await std::move(each);
      }
      co_return total;
    }(server));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "clients: %s\n", e.what());
  }
  std::fflush(stderr);
  ::_exit(good == 2 * connections ? 0 : 1);
}

TYPED_TEST(many_connections, ten_thousand_connections_are_held_and_echoed) {
  corio::net::listen_options options;
  options.backlog = 4096;
  auto listener = tcp_listener::bind(endpoint::loopback_v4(0), options);
  endpoint at = listener.local_endpoint();
  pid_t child = ::fork();  // before any runtime exists: this process has one thread
  ASSERT_GE(child, 0);
  if (child == 0) {
    listener.close();
    run_clients(TestFixture::backend, at);
  }
  int status = 0;
  {
    corio::runtime rt(runtime_options(TestFixture::backend));
    auto accepting = rt.spawn(accept_and_echo(listener, connections));
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    accepting.cancel();  // finished already if every client connected
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the client process failed: status " << status;
}

}  // namespace
