// corio::io_backend: names, current_io_backend() before and after a thread's first I/O, and which
// read path io_uring takes under each CORIO_URING_MULTISHOT.
#include <corio/detail/io_slot.hpp>
#include <corio/event_loop.hpp>
#include <corio/io_backend.hpp>
#include <corio/net/tcp_listener.hpp>
#include <corio/net/tcp_stream.hpp>
#include <corio/runtime.hpp>
#include <corio/time.hpp>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

#include "support/net.hpp"

namespace {

using corio::io_backend;
using namespace corio::test;
using namespace std::chrono_literals;

TEST(io_backend_names, each_backend_has_its_name) {
  EXPECT_EQ(corio::to_string(io_backend::automatic), "automatic");
  EXPECT_EQ(corio::to_string(io_backend::io_uring), "io_uring");
  EXPECT_EQ(corio::to_string(io_backend::epoll), "epoll");
}

TEST(io_backend_names, a_thread_without_an_executor_has_no_backend) {
  EXPECT_EQ(corio::current_io_backend(), io_backend::automatic);
}

template <class Backend>
class io_backend_choice : public backend_test<Backend> {};
TYPED_TEST_SUITE(io_backend_choice, both_backends, backend_names);

TYPED_TEST(io_backend_choice, a_loop_reports_no_backend_until_its_first_io_then_the_one_requested) {
  io_backend seen = io_backend::automatic;
  run_on_loop(TestFixture::backend, [&]() -> corio::task<void> {
    EXPECT_EQ(corio::current_io_backend(), io_backend::automatic);
    auto listener = corio::net::tcp_listener::bind(corio::net::endpoint::loopback_v4(0));
    auto client = co_await corio::net::tcp_stream::connect(listener.local_endpoint());
    seen = corio::current_io_backend();
  });
  EXPECT_EQ(seen, TestFixture::backend);
}

template <class Backend>
class io_uring_read_path : public backend_test<Backend> {};
TYPED_TEST_SUITE(io_uring_read_path, every_read_path, backend_names);

// By default an io_uring stream's reads are single-shot recvs on its registered file (the multishot
// accept stays); CORIO_URING_MULTISHOT=all serves them from a multishot recv. epoll has neither.
TYPED_TEST(io_uring_read_path, reads_come_from_a_multishot_recv_only_when_asked) {
  run_on_loop(TestFixture::backend, []() -> corio::task<void> {
    corio::detail::io_slot& slot = *corio::detail::current_io_slot;
    auto [client, server] = co_await connected_pair();
    std::size_t files = slot.registered_files();
    std::byte buffer[16];
    co_await client.write_all(bytes("ping"));
    EXPECT_EQ(co_await server.read_some(buffer), 4u);  // by now the listener's multishot accept has ended
    std::uint64_t accepted = slot.multishot_completions();
    for (int i = 0; i < 20; ++i) {
      co_await client.write_all(bytes("ping"));
      EXPECT_EQ(co_await server.read_some(buffer), 4u);
    }
    std::uint64_t from_reads = slot.multishot_completions() - accepted;
    bool uring = TestFixture::backend == io_backend::io_uring;
    EXPECT_EQ(slot.registered_files(), files + (uring ? 1 : 0));  // the server's socket, either way
    if (uring && TypeParam::multishot != nullptr) {
      EXPECT_GT(from_reads, 0u);
    } else {
      EXPECT_EQ(from_reads, 0u);
      EXPECT_EQ(accepted > 0, uring) << "the accept in connected_pair is multishot on io_uring";
    }
  });
}

// A stream first read on one loop keeps its io_uring state there: a read from a second loop while the
// first lives is refused with errc::served_by_another_reactor, whose message says why (a user trial
// found EXDEV's "Invalid cross-device link" puzzling). epoll keeps no such state and serves it.
TYPED_TEST(io_uring_read_path, a_stream_read_on_a_second_loop_is_refused_with_a_message_that_says_why) {
  std::pair<corio::net::tcp_stream, corio::net::tcp_stream> pair;
  corio::event_loop first(TestFixture::backend);  // lives on: the stream's state stays in its reactor
  run_on(first, [&pair]() -> corio::task<void> {
    pair = co_await connected_pair();
    co_await pair.first.write_all(bytes("one"));
    std::byte buffer[8];
    EXPECT_EQ(co_await pair.second.read_some(buffer), 3u);  // its state now lives in this loop's reactor
    co_await pair.first.write_all(bytes("two"));
  });
  run_on_loop(TestFixture::backend, [&pair]() -> corio::task<void> {
    std::byte buffer[8];
    const bool state_elsewhere = TestFixture::backend == io_backend::io_uring;
    try {
      EXPECT_EQ(co_await pair.second.read_some(buffer), 3u);
      EXPECT_FALSE(state_elsewhere) << "io_uring served a stream whose state another loop keeps";
    } catch (const std::system_error& e) {
      EXPECT_TRUE(state_elsewhere) << e.what();
      EXPECT_EQ(e.code(), corio::net::errc::served_by_another_reactor);
      EXPECT_NE(std::string(e.what()).find("read_some: the socket is served by another event loop's or runtime's"),
                std::string::npos)
          << e.what();
    }
  });
}

// The same from a runtime of two workers (which, unlike a loop, could serve it single-shot): a read
// is served unless the first loop keeps a multishot recv on the stream (CORIO_URING_MULTISHOT=all),
// which would take the data the read waits for (a user trial's read hung there); an accept is
// refused on io_uring, whose multishot accept in the first loop takes the connections.
TYPED_TEST(io_uring_read_path, a_socket_whose_home_keeps_a_multishot_request_is_refused_to_another_runtime) {
  std::pair<corio::net::tcp_stream, corio::net::tcp_stream> pair;
  std::optional<corio::net::tcp_listener> listener;
  corio::event_loop first(TestFixture::backend);  // lives on: the sockets' state stays in its reactor
  run_on(first, [&]() -> corio::task<void> {
    listener.emplace(corio::net::tcp_listener::bind(corio::net::endpoint::loopback_v4(0)));
    pair.first = co_await corio::net::tcp_stream::connect(listener->local_endpoint());
    pair.second = co_await listener->accept();  // the listener's multishot accept now lives here
    co_await pair.first.write_all(bytes("one"));
    std::byte buffer[8];
    EXPECT_EQ(co_await pair.second.read_some(buffer), 3u);  // and the stream's state
  });
  const bool uring = TestFixture::backend == io_backend::io_uring;
  const bool multishot_reads = uring && TypeParam::multishot != nullptr;
  corio::runtime second(runtime_options(TestFixture::backend, 2));
  second.block_on([&]() -> corio::task<void> {
    co_await pair.first.write_all(bytes("two"));
    std::byte buffer[8];
    std::error_code error;
    auto read = pair.second.read_some(buffer, error);
    std::size_t got = co_await corio::with_timeout(5s, std::move(read));
    if (multishot_reads) {
      EXPECT_EQ(error, corio::net::errc::served_by_another_reactor) << error.message();
    } else {
      EXPECT_FALSE(error) << error.message();
      EXPECT_EQ(got, 3u);
    }
    auto connect = [](corio::net::endpoint at) -> corio::task<corio::net::tcp_stream> {
      co_return co_await corio::net::tcp_stream::connect(at);
    };
    auto connecting = corio::spawn(connect(listener->local_endpoint()));
    auto accept = listener->accept(error);
    auto accepted = co_await corio::with_timeout(5s, std::move(accept));
    if (uring) {
      EXPECT_EQ(error, corio::net::errc::served_by_another_reactor) << error.message();
    } else {
      EXPECT_FALSE(error) << error.message();
      EXPECT_TRUE(accepted.is_open());
    }
    co_await std::move(connecting);
  }());
}

}  // namespace
