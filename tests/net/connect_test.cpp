// tcp_stream::connect over several addresses, and by name, typed over both backends: the first
// address that accepts wins, the last failure is reported, and a cancellation stops the attempts; by
// name on an event loop too (its blocking pool looks the name up).
#include <corio/net/tcp_listener.hpp>
#include <corio/net/tcp_stream.hpp>
#include <corio/runtime.hpp>
#include <corio/time.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "support/net.hpp"

using namespace std::chrono_literals;

namespace {

using corio::net::endpoint;
using corio::net::listen_options;
using corio::net::tcp_listener;
using corio::net::tcp_stream;
using namespace corio::test;

template <class Backend>
class connect : public backend_test<Backend> {};
TYPED_TEST_SUITE(connect, both_backends, backend_names);

// A loopback port nobody listens on (the listener that held it is closed again).
endpoint closed_port() { return tcp_listener::bind(endpoint::loopback_v4(0)).local_endpoint(); }

TYPED_TEST(connect, tries_each_address_in_turn_until_one_accepts) {
  run_on_loop(TestFixture::backend, []() -> corio::task<void> {
    auto listener = tcp_listener::bind(endpoint::loopback_v4(0));
    std::vector<endpoint> peers{closed_port(), closed_port(), listener.local_endpoint()};
    tcp_stream stream = co_await tcp_stream::connect(peers);
    EXPECT_EQ(stream.peer_endpoint(), listener.local_endpoint());
    std::error_code error = std::make_error_code(std::errc::io_error);
    tcp_stream again = co_await tcp_stream::connect(peers, error);
    EXPECT_FALSE(error) << error.message();
    EXPECT_TRUE(again.is_open());
  });
}

TYPED_TEST(connect, when_every_address_fails_the_last_ones_error_is_reported) {
  run_on_loop(TestFixture::backend, []() -> corio::task<void> {
    std::vector<endpoint> peers{closed_port(), closed_port()};
    std::error_code error;
    tcp_stream stream = co_await tcp_stream::connect(peers, error);
    EXPECT_EQ(error, std::errc::connection_refused) << error.message();
    EXPECT_FALSE(stream.is_open());
    try {
      co_await tcp_stream::connect(peers);
      ADD_FAILURE() << "connecting to closed ports did not throw";
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code(), std::errc::connection_refused);
      std::string what = e.what();
      EXPECT_NE(what.find("corio::net::tcp_stream::connect to " + peers.back().to_string()), std::string::npos)
          << what;
    }
  });
}

TYPED_TEST(connect, an_empty_list_is_an_invalid_argument) {
  run_on_loop(TestFixture::backend, []() -> corio::task<void> {
    std::error_code error;
    co_await tcp_stream::connect(std::vector<endpoint>{}, error);
    EXPECT_EQ(error, std::errc::invalid_argument);
    try {
      co_await tcp_stream::connect(std::vector<endpoint>{});
      ADD_FAILURE() << "an empty list did not throw";
    } catch (const std::system_error& e) {
      EXPECT_NE(std::string(e.what()).find("no address"), std::string::npos) << e.what();
    }
  });
}

// A listener whose accept queue is full drops the SYN, so connecting to it hangs: the deadline ends
// the whole connect there, and the address after it is never tried.
TYPED_TEST(connect, a_deadline_ends_the_attempts_without_trying_the_addresses_left) {
  run_on_loop(TestFixture::backend, []() -> corio::task<void> {
    listen_options one_at_most;
    one_at_most.backlog = 0;  // the kernel queues one connection, then drops SYNs
    auto full = tcp_listener::bind(endpoint::loopback_v4(0), one_at_most);
    tcp_stream queued = co_await tcp_stream::connect(full.local_endpoint());
    auto spare = tcp_listener::bind(endpoint::loopback_v4(0));
    std::vector<endpoint> peers{full.local_endpoint(), spare.local_endpoint()};
    std::error_code error;
    tcp_stream stream = co_await corio::with_timeout(100ms, tcp_stream::connect(peers, error));
    EXPECT_EQ(error, std::errc::timed_out) << error.message();
    EXPECT_FALSE(stream.is_open());
    EXPECT_THROW(co_await corio::with_timeout(100ms, tcp_stream::connect(peers)), corio::timed_out);
    std::error_code accepted;
    co_await corio::with_timeout(50ms, spare.accept(accepted));
    EXPECT_EQ(accepted, std::errc::timed_out) << "the address after the deadline was tried";
  });
}

TYPED_TEST(connect, a_host_name_is_resolved_and_its_addresses_tried) {
  corio::runtime rt(runtime_options(TestFixture::backend));
  rt.block_on([]() -> corio::task<void> {
    auto listener = tcp_listener::bind(endpoint::loopback_v4(0));
    // "localhost" may come first as ::1, where nobody listens: then its next address is tried.
    tcp_stream stream = co_await tcp_stream::connect("localhost", listener.local_endpoint().port());
    EXPECT_EQ(stream.peer_endpoint(), listener.local_endpoint());
    std::error_code error;
    co_await tcp_stream::connect("no-such-host.invalid", 80, error);
    EXPECT_TRUE(error) << "connecting to an unknown name succeeded";
    EXPECT_THROW(co_await tcp_stream::connect("no-such-host.invalid", 80), std::system_error);
  }());
}

TYPED_TEST(connect, a_host_name_is_resolved_on_an_event_loop_too) {
  corio::test::run_on_loop(TestFixture::backend, []() -> corio::task<void> {
    auto listener = tcp_listener::bind(endpoint::loopback_v4(0));
    tcp_stream stream = co_await tcp_stream::connect("localhost", listener.local_endpoint().port());
    EXPECT_EQ(stream.peer_endpoint(), listener.local_endpoint());
    tcp_stream accepted = co_await listener.accept();
    EXPECT_EQ(accepted.peer_endpoint(), stream.local_endpoint());
  });
}

}  // namespace
