// An accept is cancel-safe on every accept path: one that ends cancelled took no connection (a
// connection the kernel gave it anyway goes to the listener's next accept), so an accept loop that
// races its accept against a shutdown signal in when_any loses no client.
#include <corio/event_loop.hpp>
#include <corio/join_handle.hpp>
#include <corio/net/tcp_listener.hpp>
#include <corio/net/tcp_stream.hpp>
#include <corio/net/udp_socket.hpp>
#include <corio/runtime.hpp>
#include <corio/time.hpp>
#include <corio/when_any.hpp>

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

#include "support/net.hpp"

using namespace std::chrono_literals;

namespace {

using corio::net::endpoint;
using corio::net::tcp_listener;
using corio::net::tcp_stream;
using corio::net::udp_socket;
using namespace corio::test;

template <class Backend>
class cancel_safe_accept : public backend_test<Backend> {};
TYPED_TEST_SUITE(cancel_safe_accept, every_accept_path, backend_names);

// An accept raced against a datagram's arrival: the accepted stream, or a closed one if the receive
// won.
corio::task<tcp_stream> accept_or_receive(tcp_listener& listener, udp_socket& datagrams) {
  std::array<std::byte, 8> buffer;
  auto accepting = listener.accept();
  auto receiving = datagrams.recv_from(buffer);
  auto first = co_await corio::when_any(std::move(accepting), std::move(receiving));
  co_return first.index() == 0 ? std::move(std::get<0>(first)) : tcp_stream();
}

// The next connection within 2 s, or a closed stream.
corio::task<tcp_stream> accept_within_2s(tcp_listener& listener) {
  std::error_code error;
  tcp_stream accepted = co_await corio::with_timeout(2s, listener.accept(error));
  co_return accepted;
}

// A round's two plain sockets: a datagram for the receive, and a client for the accept.
struct round_clients {
  int sender = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  round_clients(const endpoint& datagram_to, const endpoint& server) {
    EXPECT_EQ(::sendto(sender, "d", 1, 0, datagram_to.data(), datagram_to.size()), 1);
    EXPECT_EQ(::connect(client, server.data(), server.size()), 0);
  }
  round_clients(const round_clients&) = delete;
  round_clients& operator=(const round_clients&) = delete;
  ~round_clients() {
    ::close(client);
    ::close(sender);
  }
};

// Each round, with both the accept and the receive waiting, this thread sends a datagram and
// connects a plain client (both system calls finish at once on loopback) before its reactor looks
// again, so both operations often complete in the same turn: the receive's branch may then win and
// cancel an accept that holds the client's connection. Whichever wins, the client's connection must
// reach the server: from the race, or from the next accept. `receives_won` counts the rounds the
// accept lost. `beside_a_waiting_accept`: a second accept waits behind the racing one, and a
// connection the racing accept took for its cancelled task must reach it at once, with no other
// connection arriving to wake it.
corio::task<void> race_rounds(int rounds, int* receives_won, bool beside_a_waiting_accept = false) {
  auto listener = tcp_listener::bind(endpoint::loopback_v4(0));
  const endpoint server = listener.local_endpoint();
  for (int round = 0; round < rounds; ++round) {
    auto datagrams = udp_socket::bind(endpoint::loopback_v4(0));
    auto racing = corio::spawn(accept_or_receive(listener, datagrams));
    co_await corio::sleep_for(1ms);  // both operations wait in the reactor (the accept first in line)
    std::optional<corio::join_handle<tcp_stream>> waiting;
    if (beside_a_waiting_accept) {
      waiting.emplace(corio::spawn(accept_within_2s(listener)));
      co_await corio::sleep_for(1ms);
    }
    round_clients clients(datagrams.local_endpoint(), server);
    tcp_stream accepted = co_await std::move(racing);
    if (accepted.is_open() && waiting) {
      waiting->cancel();  // the racing accept won: nothing is left for the waiting one
      try {
        co_await std::move(*waiting);
      } catch (const corio::cancelled&) {
      }
    } else if (!accepted.is_open()) {
      ++*receives_won;
      if (waiting) {
        accepted = co_await std::move(*waiting);
      } else {
        accepted = co_await accept_within_2s(listener);
      }
      if (!accepted.is_open()) {
        ADD_FAILURE() << "round " << round << ": the client's connection was lost";
        co_return;
      }
    }
    EXPECT_EQ(::send(clients.client, "ping", 4, MSG_NOSIGNAL), 4);
    std::array<char, 4> got{};
    co_await accepted.read_exact(std::as_writable_bytes(std::span(got)));
    EXPECT_EQ(std::string(got.data(), got.size()), "ping") << "round " << round;
  }
}

TYPED_TEST(cancel_safe_accept, an_accept_that_loses_a_when_any_leaves_its_connection_to_the_next_accept) {
  int receives_won = 0;
  run_on_loop(TestFixture::backend, [&]() -> corio::task<void> { co_await race_rounds(200, &receives_won); });
  EXPECT_GT(receives_won, 0);  // the race this test is about happened
}

TYPED_TEST(cancel_safe_accept, an_accept_that_loses_a_when_any_leaves_its_connection_on_two_workers) {
  corio::runtime rt(runtime_options(TestFixture::backend, 2));
  int receives_won = 0;
  rt.block_on([&]() -> corio::task<void> { co_await race_rounds(200, &receives_won); }());
  EXPECT_GT(receives_won, 0);
}

TYPED_TEST(cancel_safe_accept, a_connection_a_cancelled_accept_took_wakes_an_accept_already_waiting) {
  int receives_won = 0;
  run_on_loop(TestFixture::backend,
              [&]() -> corio::task<void> { co_await race_rounds(100, &receives_won, true); });
  EXPECT_GT(receives_won, 0);
}

TYPED_TEST(cancel_safe_accept, a_connection_a_cancelled_accept_took_wakes_an_accept_waiting_on_two_workers) {
  corio::runtime rt(runtime_options(TestFixture::backend, 2));
  int receives_won = 0;
  rt.block_on([&]() -> corio::task<void> { co_await race_rounds(100, &receives_won, true); }());
  EXPECT_GT(receives_won, 0);
}

// An event loop destroyed with an accept waiting in it, just after the kernel completed that accept
// with a connection (the loop never ran again to see it): the connection goes to the listener's next
// accept, on another loop, instead of going down with the accept's frame, its descriptor left open (a
// stress run: each such loop leaked one on io_uring's single-shot accept path).
TYPED_TEST(cancel_safe_accept, a_connection_accepted_as_its_loop_is_destroyed_goes_to_the_next_accept) {
  auto listener = tcp_listener::bind(endpoint::loopback_v4(0));
  const endpoint server = listener.local_endpoint();
  int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  {
    corio::event_loop loop(TestFixture::backend);
    loop.spawn([&]() -> corio::task<void> { tcp_stream accepted = co_await listener.accept(); });
    loop.block_on([]() -> corio::task<void> { co_await corio::sleep_for(5ms); });  // the accept waits
    EXPECT_EQ(::connect(client, server.data(), server.size()), 0);  // accepted in the kernel at once
  }
  corio::event_loop next(TestFixture::backend);
  tcp_stream accepted = next.block_on(accept_within_2s(listener));
  EXPECT_TRUE(accepted.is_open()) << "the connection was lost";
  if (accepted.is_open()) {
    EXPECT_EQ(::send(client, "ping", 4, MSG_NOSIGNAL), 4);
    std::string got = next.block_on([&]() -> corio::task<std::string> {
      std::array<char, 4> bytes{};
      co_await corio::with_timeout(2s, accepted.read_exact(std::as_writable_bytes(std::span(bytes))));
      co_return std::string(bytes.data(), bytes.size());
    });
    EXPECT_EQ(got, "ping");
  }
  ::close(client);
}

}  // namespace
