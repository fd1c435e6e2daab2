// corio::net::udp_socket typed over both backends: datagrams round trip with their sender, a
// receive gives up under with_timeout, and a datagram cut to the buffer is reported truncated.
#include <corio/event_loop.hpp>
#include <corio/join_handle.hpp>
#include <corio/net/udp_socket.hpp>
#include <corio/time.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "support/net.hpp"

using namespace std::chrono_literals;

namespace {

using corio::net::endpoint;
using corio::net::udp_socket;
using namespace corio::test;

template <class Backend>
class udp : public backend_test<Backend> {};
TYPED_TEST_SUITE(udp, both_backends, backend_names);

TYPED_TEST(udp, udp_datagrams_round_trip_with_their_sender) {
  run_on_loop(TestFixture::backend, []() -> corio::task<void> {
    auto a = udp_socket::bind(endpoint::loopback_v4(0));
    auto b = udp_socket::bind(endpoint::loopback_v4(0));
    std::byte buffer[64];
    auto receiving = corio::spawn([](udp_socket& s, std::span<std::byte> into) -> corio::task<corio::net::datagram> {
      co_return co_await s.recv_from(into);
    }(b, buffer));
    EXPECT_EQ(co_await a.send_to(bytes("ping"), b.local_endpoint()), 4u);
    corio::net::datagram got = co_await std::move(receiving);
    EXPECT_EQ(text(std::span<const std::byte>(buffer, got.size)), "ping");
    EXPECT_EQ(got.from, a.local_endpoint());
    co_await b.send_to(bytes("pong!"), got.from);
    corio::net::datagram back = co_await a.recv_from(buffer);
    EXPECT_EQ(text(std::span<const std::byte>(buffer, back.size)), "pong!");
    EXPECT_THROW(co_await corio::with_timeout(20ms, a.recv_from(buffer)), corio::timed_out);
  });
}

// A datagram longer than the buffer fills it and says it was truncated; one that fits, or an empty
// one, does not.
TYPED_TEST(udp, a_datagram_longer_than_the_buffer_is_reported_truncated) {
  run_on_loop(TestFixture::backend, []() -> corio::task<void> {
    auto a = udp_socket::bind(endpoint::loopback_v4(0));
    auto b = udp_socket::bind(endpoint::loopback_v4(0));
    const std::string longer(100, 'x');
    co_await a.send_to(bytes(longer), b.local_endpoint());
    co_await a.send_to(bytes("fits"), b.local_endpoint());
    co_await a.send_to(std::span<const std::byte>(), b.local_endpoint());
    std::byte buffer[10];
    corio::net::datagram cut = co_await b.recv_from(buffer);
    EXPECT_TRUE(cut.truncated);
    EXPECT_EQ(cut.size, sizeof(buffer));
    EXPECT_EQ(text(buffer), longer.substr(0, sizeof(buffer)));
    corio::net::datagram whole = co_await b.recv_from(buffer);
    EXPECT_FALSE(whole.truncated);
    EXPECT_EQ(text(std::span<const std::byte>(buffer, whole.size)), "fits");
    corio::net::datagram empty = co_await b.recv_from(buffer);
    EXPECT_FALSE(empty.truncated);
    EXPECT_EQ(empty.size, 0u);
    EXPECT_EQ(empty.from, a.local_endpoint());
  });
}

}  // namespace
