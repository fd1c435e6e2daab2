// A connected corio::net::udp_socket, typed over both backends: send and recv without addresses,
// datagrams from anyone but the peer dropped, an ICMP port-unreachable ending a receive (one already
// waiting, or one that starts after it) or the next send with connection_refused, and the misuses: a
// send with no peer, a peer of the other family, the peer asked for before connect; over IPv4 and IPv6.
#include <corio/event_loop.hpp>
#include <corio/join_handle.hpp>
#include <corio/net/udp_socket.hpp>
#include <corio/time.hpp>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <span>
#include <string>
#include <system_error>

#include "support/net.hpp"

using namespace std::chrono_literals;

namespace {

using corio::net::endpoint;
using corio::net::udp_socket;
using namespace corio::test;

template <class Backend>
class udp_connected : public backend_test<Backend> {};
TYPED_TEST_SUITE(udp_connected, both_backends, backend_names);

// A loopback port nothing listens on: a socket bound to it, then closed.
endpoint unused_port() {
  auto probe = udp_socket::bind(endpoint::loopback_v4(0));
  return probe.local_endpoint();
}

TYPED_TEST(udp_connected, send_and_recv_need_no_address) {
  run_on_loop(TestFixture::backend, []() -> corio::task<void> {
    auto a = udp_socket::bind(endpoint::loopback_v4(0));
    auto b = udp_socket::bind(endpoint::loopback_v4(0));
    a.connect(b.local_endpoint());
    EXPECT_EQ(a.peer_endpoint(), b.local_endpoint());
    EXPECT_EQ(co_await a.send(bytes("ping")), 4u);
    std::byte buffer[16];
    corio::net::datagram got = co_await b.recv_from(buffer);
    EXPECT_EQ(text(std::span<const std::byte>(buffer, got.size)), "ping");
    EXPECT_EQ(got.from, a.local_endpoint());
    co_await b.send_to(bytes("pong!"), got.from);
    corio::net::datagram back = co_await a.recv(buffer);
    EXPECT_EQ(text(std::span<const std::byte>(buffer, back.size)), "pong!");
    EXPECT_EQ(back.from, b.local_endpoint());
  });
}

TYPED_TEST(udp_connected, datagrams_from_anyone_but_the_peer_are_dropped) {
  run_on_loop(TestFixture::backend, []() -> corio::task<void> {
    auto a = udp_socket::bind(endpoint::loopback_v4(0));
    auto peer = udp_socket::bind(endpoint::loopback_v4(0));
    auto other = udp_socket::bind(endpoint::loopback_v4(0));
    a.connect(peer.local_endpoint());
    co_await other.send_to(bytes("not for you"), a.local_endpoint());
    co_await peer.send_to(bytes("yours"), a.local_endpoint());
    std::byte buffer[16];
    corio::net::datagram got = co_await a.recv(buffer);
    EXPECT_EQ(text(std::span<const std::byte>(buffer, got.size)), "yours");
    EXPECT_EQ(got.from, peer.local_endpoint());
    std::error_code error;
    co_await corio::with_timeout(50ms, a.recv(buffer, error));
    EXPECT_EQ(error, std::errc::timed_out) << error.message();
  });
}

// Nothing listens at the peer's port: the kernel's ICMP port-unreachable ends the receive.
TYPED_TEST(udp_connected, a_peer_that_is_not_there_is_refused) {
  run_on_loop(TestFixture::backend, []() -> corio::task<void> {
    auto a = udp_socket::bind(endpoint::loopback_v4(0));
    a.connect(unused_port());
    std::byte buffer[16];
    std::error_code error;
    // A receive already waiting when the refusal comes.
    auto waiting = corio::spawn([](udp_socket& s, std::span<std::byte> into) -> corio::task<std::error_code> {
      std::error_code failed;
      co_await corio::with_timeout(5s, s.recv(into, failed));
      co_return failed;
    }(a, buffer));
    co_await corio::sleep_for(10ms);  // let it wait in the reactor
    co_await a.send(bytes("anyone?"));
    EXPECT_EQ(co_await std::move(waiting), std::errc::connection_refused);
    // A receive that starts after it (the error waits in the socket), in the throwing form.
    co_await a.send(bytes("anyone?"));
    try {
      co_await corio::with_timeout(5s, a.recv(buffer));
      ADD_FAILURE() << "a receive from a peer that is not there returned";
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code(), std::errc::connection_refused);
      EXPECT_NE(std::string(e.what()).find("corio::net::udp_socket::recv"), std::string::npos) << e.what();
    }
    // A send after a refused one reports it too.
    co_await a.send(bytes("anyone?"));
    co_await a.send(bytes("anyone?"), error);
    EXPECT_EQ(error, std::errc::connection_refused) << error.message();
    // Each refusal is reported once: the socket works on.
    auto b = udp_socket::bind(endpoint::loopback_v4(0));
    a.connect(b.local_endpoint());
    co_await a.send(bytes("again"), error);
    EXPECT_FALSE(error) << error.message();
    co_await b.send_to(bytes("here"), a.local_endpoint());
    corio::net::datagram got = co_await corio::with_timeout(5s, a.recv(buffer));
    EXPECT_EQ(text(std::span<const std::byte>(buffer, got.size)), "here");
  });
}

// The same over IPv6, where the refusal is an ICMPv6 port-unreachable.
TYPED_TEST(udp_connected, ipv6_round_trip_and_refusal) {
  std::error_code error;
  auto a = udp_socket::bind(endpoint::loopback_v6(0), error);
  if (error) {
    GTEST_SKIP() << "no IPv6 loopback here: " << error.message();
  }
  run_on_loop(TestFixture::backend, [&]() -> corio::task<void> {
    auto b = udp_socket::bind(endpoint::loopback_v6(0));
    a.connect(b.local_endpoint());
    co_await a.send(bytes("six"));
    std::byte buffer[16];
    corio::net::datagram got = co_await b.recv_from(buffer);
    EXPECT_EQ(got.from, a.local_endpoint());
    co_await b.send_to(bytes("xis"), got.from);
    got = co_await a.recv(buffer);
    EXPECT_EQ(text(std::span<const std::byte>(buffer, got.size)), "xis");
    endpoint nobody = b.local_endpoint();
    b.close();  // nothing listens at its port now
    a.connect(nobody);
    co_await a.send(bytes("anyone?"));
    std::error_code refused;
    co_await corio::with_timeout(5s, a.recv(buffer, refused));
    EXPECT_EQ(refused, std::errc::connection_refused) << refused.message();
  });
}

TYPED_TEST(udp_connected, a_send_without_a_peer_needs_a_destination) {
  run_on_loop(TestFixture::backend, []() -> corio::task<void> {
    auto a = udp_socket::bind(endpoint::loopback_v4(0));
    std::error_code error;
    EXPECT_EQ(co_await a.send(bytes("x"), error), 0u);
    EXPECT_EQ(error, std::errc::destination_address_required) << error.message();
    try {
      co_await a.send(bytes("x"));
      ADD_FAILURE() << "a send with no peer returned";
    } catch (const std::system_error& e) {
      EXPECT_NE(std::string(e.what()).find("corio::net::udp_socket::send"), std::string::npos) << e.what();
    }
  });
}

TEST(udp_connect, misuses_are_reported_with_the_operation) {
  auto a = udp_socket::bind(endpoint::loopback_v4(0));
  std::error_code error;
  a.peer_endpoint(error);
  EXPECT_EQ(error, std::errc::not_connected) << error.message();
  const endpoint v6 = endpoint::loopback_v6(9);
  a.connect(v6, error);
  EXPECT_TRUE(error) << "a v4 socket connected to an IPv6 peer";
  try {
    a.connect(v6);
    ADD_FAILURE() << "connect to a peer of the other family returned";
  } catch (const std::system_error& e) {
    EXPECT_NE(std::string(e.what()).find("corio::net::udp_socket::connect to [::1]:9"), std::string::npos)
        << e.what();
  }
  udp_socket closed;
  closed.connect(endpoint::loopback_v4(9), error);
  EXPECT_EQ(error, std::error_code(EBADF, std::system_category())) << error.message();
}

}  // namespace
