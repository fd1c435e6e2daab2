// TCP and UDP behaviour typed over both backends: peers that misbehave (disconnect mid-message,
// half-close, reset, never read), errors that name their operation, EMFILE on accept, UDP round trips.
#include <corio/event_loop.hpp>
#include <corio/join_handle.hpp>
#include <corio/net/tcp_listener.hpp>
#include <corio/net/tcp_stream.hpp>
#include <corio/net/udp_socket.hpp>
#include <corio/time.hpp>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "support/net.hpp"

using namespace std::chrono_literals;

namespace {

using corio::net::endpoint;
using corio::net::tcp_listener;
using corio::net::tcp_stream;
using corio::net::udp_socket;
using namespace corio::test;

template <class Backend>
class tcp : public backend_test<Backend> {};
TYPED_TEST_SUITE(tcp, both_backends, backend_names);

TYPED_TEST(tcp, read_exact_reports_end_of_stream_when_the_peer_disconnects_mid_message) {
  run_on_loop(TestFixture::backend, []() -> corio::task<void> {
    auto [client, server] = co_await connected_pair();
    co_await client.write_all(bytes("half a mess"));
    client.close();
    std::string message(100, '\0');
    std::error_code error;
    std::size_t got = co_await server.read_exact(std::as_writable_bytes(std::span(message)), error);
    EXPECT_EQ(got, 11u);
    EXPECT_EQ(error, corio::net::errc::end_of_stream);
    try {
      co_await server.read_exact(std::as_writable_bytes(std::span(message)));
      ADD_FAILURE() << "read_exact after end of stream did not throw";
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code(), corio::net::errc::end_of_stream);
      EXPECT_NE(std::string(e.what()).find("corio::net::tcp_stream::read_exact"), std::string::npos) << e.what();
    }
  });
}

TYPED_TEST(tcp, a_half_closed_peer_still_receives_the_reply) {
  run_on_loop(TestFixture::backend, []() -> corio::task<void> {
    auto [client, server] = co_await connected_pair();
    co_await client.write_all(bytes("request"));
    client.shutdown(SHUT_WR);
    std::string request;
    std::byte buffer[4];
    for (;;) {  // the server reads to end of stream...
      std::size_t n = co_await server.read_some(buffer);
      if (n == 0) {
        break;
      }
      request += text(std::span<const std::byte>(buffer, n));
    }
    EXPECT_EQ(request, "request");
    co_await server.write_all(bytes("reply"));  // ...and can still answer on its open direction
    server.close();
    std::string reply(5, '\0');
    co_await client.read_exact(std::as_writable_bytes(std::span(reply)));
    EXPECT_EQ(reply, "reply");
    std::byte more[1];
    EXPECT_EQ(co_await client.read_some(more), 0u);
  });
}

TYPED_TEST(tcp, a_reset_fails_the_pending_read_with_connection_reset) {
  run_on_loop(TestFixture::backend, []() -> corio::task<void> {
    auto [client, server] = co_await connected_pair();
    std::byte buffer[16];
    auto reader = corio::spawn([](tcp_stream& s, std::span<std::byte> b) -> corio::task<std::error_code> {
      std::error_code error;
      co_await s.read_some(b, error);
      co_return error;
    }(server, buffer));
    co_await corio::sleep_for(10ms);
    linger abort_on_close{1, 0};  // close() sends RST instead of FIN
    EXPECT_EQ(::setsockopt(client.native_handle(), SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof(abort_on_close)), 0);
    client.close();
    std::error_code error = co_await std::move(reader);
    EXPECT_EQ(error, std::errc::connection_reset) << error.message();
    // Writing to the reset connection fails too, with an error that names the operation.
    try {
      co_await server.write_all(bytes("anyone?"));
      co_await server.write_all(bytes("anyone?"));
      ADD_FAILURE() << "writing to a reset connection did not fail";
    } catch (const std::system_error& e) {
      EXPECT_NE(std::string(e.what()).find("corio::net::tcp_stream::write_all"), std::string::npos) << e.what();
    }
  });
}

TYPED_TEST(tcp, connect_to_a_closed_port_fails_with_connection_refused) {
  run_on_loop(TestFixture::backend, []() -> corio::task<void> {
    endpoint nowhere = [] {
      auto listener = tcp_listener::bind(endpoint::loopback_v4(0));
      return listener.local_endpoint();  // closed again when this returns
    }();
    std::error_code error;
    tcp_stream stream = co_await tcp_stream::connect(nowhere, error);
    EXPECT_EQ(error, std::errc::connection_refused);
    EXPECT_FALSE(stream.is_open());
    try {
      co_await tcp_stream::connect(nowhere);
      ADD_FAILURE() << "connect to a closed port did not throw";
    } catch (const std::system_error& e) {
      EXPECT_NE(std::string(e.what()).find("corio::net::tcp_stream::connect"), std::string::npos) << e.what();
    }
  });
}

// A client that never reads: the server's write_all suspends once the kernel's buffers are full,
// the memory it holds stays its own buffer (no queueing in corio), and cancelling it frees the task.
TYPED_TEST(tcp, a_client_that_never_reads_suspends_the_writer_with_bounded_buffering) {
  corio::runtime rt(runtime_options(TestFixture::backend));
  rt.block_on([]() -> corio::task<void> {
    auto [client, server] = co_await connected_pair();
    std::vector<std::byte> chunk(64 * 1024, std::byte{'x'});
    std::size_t written = 0;
    auto writer = corio::spawn([](tcp_stream& s, std::span<const std::byte> data, std::size_t& total) -> corio::task<void> {
      for (int i = 0; i < 4096; ++i) {  // 256 MiB if nothing pushed back
        total += co_await s.write_some(data);
      }
    }(server, chunk, written));
    co_await corio::sleep_for(300ms);
    EXPECT_FALSE(writer.is_finished());
    EXPECT_LT(written, 64u * 1024 * 1024) << "the writer was never held back";
    EXPECT_GT(written, 0u);
    std::size_t settled = written;
    co_await corio::sleep_for(50ms);
    EXPECT_EQ(written, settled) << "the writer kept going while nobody read";
    writer.cancel();
    EXPECT_THROW(co_await std::move(writer), corio::cancelled);
    // Reading resumes the flow: the client drains what was buffered.
    std::size_t drained = 0;
    std::vector<std::byte> sink(256 * 1024);
    while (drained < settled) {
      drained += co_await client.read_some(sink);
    }
    EXPECT_EQ(drained, settled);
  }());
}

// Accept hitting EMFILE reports it to that accept only; the accept loop goes on and serves again
// once descriptors free up.
TYPED_TEST(tcp, accept_hitting_emfile_keeps_the_accept_loop_alive) {
  rlimit original{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &original), 0);
  run_on_loop(TestFixture::backend, [&]() -> corio::task<void> {
    // Warm-up: with every descriptor taken, UBSan cannot check a vptr it has not seen yet (its memory
    // probe needs a pipe), so park, reap and cancel once before (the reactor's and parker's types).
    // On its own listener: io_uring's accept takes RLIMIT_NOFILE when it is armed, and the multishot
    // accept stays armed across accepts, so the listener under test first accepts under the limit.
    auto warm_up = tcp_listener::bind(endpoint::loopback_v4(0));
    EXPECT_THROW(co_await corio::with_timeout(5ms, warm_up.accept()), corio::timed_out);
    auto listener = tcp_listener::bind(endpoint::loopback_v4(0));
    // Use up every descriptor under a lowered limit but one, which the client's socket takes: the
    // connection then waits in the kernel's accept queue and every accept of it fails with EMFILE
    // (io_uring's multishot accept, armed since the warm-up, meets EMFILE the moment it arrives).
    std::vector<int> hogs;
    rlimit tight = original;
    tight.rlim_cur = 64;
    EXPECT_EQ(::setrlimit(RLIMIT_NOFILE, &tight), 0);
    for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) {
      hogs.push_back(fd);
    }
    ::close(hogs.back());
    hogs.pop_back();
    auto client = co_await tcp_stream::connect(listener.local_endpoint());
    int emfile_seen = 0;
    tcp_stream accepted;
    for (int attempt = 0; attempt < 100 && !accepted.is_open(); ++attempt) {
      std::error_code error;
      accepted = co_await listener.accept(error);
      // By value and address: no error_category member call while descriptors are exhausted.
      if (error.value() == EMFILE && &error.category() == &std::system_category()) {
        ++emfile_seen;
        if (emfile_seen == 3) {  // the loop is alive; now let descriptors free up
          for (int fd : hogs) {
            ::close(fd);
          }
          hogs.clear();
          ::setrlimit(RLIMIT_NOFILE, &original);
        }
        co_await corio::sleep_for(1ms);
      } else {
        EXPECT_FALSE(error) << error.message();
      }
    }
    EXPECT_GE(emfile_seen, 3);
    EXPECT_TRUE(accepted.is_open());
    if (!accepted.is_open()) {
      co_return;
    }
    co_await client.write_all(bytes("served"));
    std::string got(6, '\0');
    co_await accepted.read_exact(std::as_writable_bytes(std::span(got)));
    EXPECT_EQ(got, "served");
  });
  ::setrlimit(RLIMIT_NOFILE, &original);
}

TYPED_TEST(tcp, udp_datagrams_round_trip_with_their_sender) {
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

TYPED_TEST(tcp, ipv6_loopback_round_trip) {
  std::error_code error;
  auto listener = tcp_listener::bind(endpoint::loopback_v6(0), {}, error);
  if (error) {
    GTEST_SKIP() << "no IPv6 loopback here: " << error.message();
  }
  run_on_loop(TestFixture::backend, [&]() -> corio::task<void> {
    auto serving = corio::spawn([](tcp_listener& l) -> corio::task<void> { co_await echo_connection(co_await l.accept()); }(listener));
    EXPECT_EQ(co_await echo_once(listener.local_endpoint(), "six"), "six");
    co_await std::move(serving);
  });
}

}  // namespace
