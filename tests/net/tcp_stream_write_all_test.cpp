// tcp_stream::write_all, a whole transfer the reactor carries out (io_op.hpp): everything arrives in
// order however many sends it takes; stopped part-way (cancelled, or the peer gone) it reports exactly
// how much went out. Typed over both backends, on a runtime (plain sends) and on an event loop.
#include <corio/join_handle.hpp>
#include <corio/net/tcp_listener.hpp>
#include <corio/net/tcp_stream.hpp>
#include <corio/runtime.hpp>
#include <corio/time.hpp>

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/net.hpp"

using namespace std::chrono_literals;

namespace {

using corio::net::endpoint;
using corio::net::tcp_listener;
using corio::net::tcp_stream;
using namespace corio::test;

template <class Backend>
class write_all : public backend_test<Backend> {};
TYPED_TEST_SUITE(write_all, both_backends, backend_names);

std::vector<std::byte> pattern(std::size_t size) {
  std::vector<std::byte> bytes(size);
  for (std::size_t i = 0; i < size; ++i) {
    bytes[i] = static_cast<std::byte>((i * 7) % 251);
  }
  return bytes;
}

// The error_code form of write_all, for a spawned writer: the count and the error land in the caller's.
corio::task<void> write_all_into(tcp_stream& stream, const std::vector<std::byte>& data, std::error_code& error,
                                 std::size_t& reported) {
  reported = co_await stream.write_all(data, error);
}

// Far more than the socket buffers hold: the send is short many times over while the reader catches up.
corio::task<void> large_write_arrives_whole() {
  auto [client, server] = co_await connected_pair();
  const std::vector<std::byte> sent = pattern(24 * 1024 * 1024);
  auto writer = corio::spawn([](tcp_stream& s, const std::vector<std::byte>& data) -> corio::task<std::size_t> {
    co_return co_await s.write_all(data);
  }(server, sent));
  std::vector<std::byte> received(sent.size());
  std::size_t got = co_await client.read_exact(received);
  EXPECT_EQ(got, sent.size());
  EXPECT_EQ(co_await std::move(writer), sent.size());
  EXPECT_TRUE(received == sent) << "the bytes arrived out of order or changed";
}

TYPED_TEST(write_all, a_write_larger_than_the_socket_buffers_arrives_whole_and_in_order_on_a_runtime) {
  corio::runtime rt(runtime_options(TestFixture::backend));
  rt.block_on(large_write_arrives_whole());
}

TYPED_TEST(write_all, a_write_larger_than_the_socket_buffers_arrives_whole_and_in_order_on_a_loop) {
  run_on_loop(TestFixture::backend, large_write_arrives_whole);
}

// A reader that never reads: the write stalls part-way; cancelled, it reports the bytes that went out,
// and the reader then finds exactly those bytes and nothing more.
TYPED_TEST(write_all, a_write_cancelled_part_way_reports_exactly_the_bytes_sent) {
  corio::runtime rt(runtime_options(TestFixture::backend));
  rt.block_on([]() -> corio::task<void> {
    auto [client, server] = co_await connected_pair();
    const std::vector<std::byte> data = pattern(64 * 1024 * 1024);
    std::error_code error;
    std::size_t reported = 0;
    auto writer = corio::spawn(write_all_into(server, data, error, reported));
    co_await corio::sleep_for(200ms);
    EXPECT_FALSE(writer.is_finished()) << "64 MiB fit in the socket buffers";
    writer.cancel();
    co_await std::move(writer);
    EXPECT_EQ(error, std::make_error_code(std::errc::operation_canceled)) << error.message();
    EXPECT_GT(reported, 0u);
    EXPECT_LT(reported, data.size());
    std::vector<std::byte> received(reported);
    EXPECT_EQ(co_await client.read_exact(received), reported);
    EXPECT_TRUE(std::equal(received.begin(), received.end(), data.begin())) << "the bytes sent were not a prefix";
    std::byte extra[16];
    EXPECT_THROW(co_await corio::with_timeout(100ms, client.read_some(extra)), corio::timed_out)
        << "more bytes arrived than the write reported";
  }());
}

// After a write stalled on a full send buffer, the peer reads 1 MiB: the acknowledgements free room
// in the send buffer, though less than the third of it for which epoll would report the socket
// writable. The next write takes that room at once on both backends (epoll once waited for an event
// that never came and timed out).
TYPED_TEST(write_all, a_write_after_one_that_timed_out_takes_the_room_the_peer_frees) {
  corio::runtime rt(runtime_options(TestFixture::backend));
  rt.block_on([]() -> corio::task<void> {
    auto [client, server] = co_await connected_pair();
    const std::vector<std::byte> data = pattern(64 * 1024 * 1024);
    std::error_code error;
    const std::size_t stalled = co_await corio::with_timeout(300ms, server.write_all(data, error));
    EXPECT_EQ(error, std::make_error_code(std::errc::timed_out)) << error.message();
    std::vector<std::byte> drained(128 * 1024);
    EXPECT_EQ(co_await client.read_exact(drained), drained.size());
    co_await corio::sleep_for(20ms);  // the window update and the acknowledgements cross loopback
    const std::span<const std::byte> rest = std::span(data).subspan(stalled);
    const std::size_t more = co_await corio::with_timeout(500ms, server.write_some(rest, error));
    EXPECT_FALSE(error) << error.message();
    EXPECT_GT(more, 0u);
  }());
}

// The peer closes without reading: the write fails part-way with the socket's error and reports the
// bytes it sent before, without throwing in the error_code form; the throwing form names write_all.
TYPED_TEST(write_all, a_peer_that_closes_fails_the_write_with_its_count) {
  corio::runtime rt(runtime_options(TestFixture::backend));
  rt.block_on([]() -> corio::task<void> {
    auto [client, server] = co_await connected_pair();
    const std::vector<std::byte> data = pattern(64 * 1024 * 1024);
    std::error_code error;
    std::size_t reported = 0;
    auto writer = corio::spawn(write_all_into(server, data, error, reported));
    co_await corio::sleep_for(100ms);
    client.close();
    co_await std::move(writer);
    EXPECT_TRUE(error) << "the write to a closed peer did not fail";
    EXPECT_LT(reported, data.size());
    try {
      co_await server.write_all(data);
      ADD_FAILURE() << "a write to a closed peer succeeded";
    } catch (const std::system_error& e) {
      EXPECT_NE(std::string(e.what()).find("corio::net::tcp_stream::write_all"), std::string::npos) << e.what();
    }
  }());
}

TYPED_TEST(write_all, an_empty_write_finishes_at_once_with_zero) {
  run_on_loop(TestFixture::backend, []() -> corio::task<void> {
    auto [client, server] = co_await connected_pair();
    std::error_code error = std::make_error_code(std::errc::io_error);
    EXPECT_EQ(co_await server.write_all(std::span<const std::byte>(), error), 0u);
    EXPECT_FALSE(error);
  });
}

// The text forms: the error_code one writes the whole string like the throwing one, and stores a
// failure instead of throwing it.
TYPED_TEST(write_all, text_is_written_whole_and_its_error_code_form_stores_the_error) {
  run_on_loop(TestFixture::backend, []() -> corio::task<void> {
    auto [client, server] = co_await connected_pair();
    std::error_code error = std::make_error_code(std::errc::io_error);
    EXPECT_EQ(co_await server.write_all("hello", error), 5u);
    EXPECT_FALSE(error) << error.message();
    std::byte received[5];
    EXPECT_EQ(co_await client.read_exact(received), 5u);
    EXPECT_EQ(text(received), "hello");
    server.shutdown(SHUT_WR);
    EXPECT_EQ(co_await server.write_all("after shutdown", error), 0u);
    EXPECT_EQ(error, std::errc::broken_pipe) << error.message();
  });
}

// A write started while another is in flight on the same stream throws std::logic_error naming it
// (a user trial saw two writers' bytes interleave), in either form and for write_some too; the first
// write goes on whole, and a write after it is served. On a runtime of two workers, so the writers
// may run on either.
corio::task<void> a_second_writer_is_refused() {
  auto [client, server] = co_await connected_pair();
  const std::vector<std::byte> sent = pattern(8 * 1024 * 1024);  // more than the socket buffers hold
  auto first = corio::spawn([](tcp_stream& s, const std::vector<std::byte>& data) -> corio::task<std::size_t> {
    co_return co_await s.write_all(data);
  }(server, sent));
  co_await corio::sleep_for(10ms);  // the first write waits for room
  std::string refused;
  try {
    co_await corio::with_timeout(1s, server.write_all("second"));  // a write let through would wait
  } catch (const std::logic_error& misuse) {
    refused = misuse.what();
  } catch (const corio::timed_out&) {
  }
  EXPECT_NE(refused.find("corio::net::tcp_stream::write_all: another write is in flight"), std::string::npos)
      << refused;
  std::error_code error;
  EXPECT_THROW(co_await corio::with_timeout(1s, server.write_all("second", error)), std::logic_error);
  EXPECT_THROW(co_await corio::with_timeout(1s, server.write_some(std::as_bytes(std::span("x", 1)), error)),
               std::logic_error);
  std::vector<std::byte> received(sent.size());
  EXPECT_EQ(co_await client.read_exact(received), sent.size());
  EXPECT_EQ(co_await std::move(first), sent.size());
  EXPECT_TRUE(received == sent) << "the first write's bytes were mixed with another's";
  EXPECT_EQ(co_await server.write_all("after"), 5u);
  std::byte after[5];
  EXPECT_EQ(co_await client.read_exact(after), 5u);
  EXPECT_EQ(text(after), "after");
}

TYPED_TEST(write_all, a_write_started_while_another_is_in_flight_is_refused) {
  corio::runtime rt(runtime_options(TestFixture::backend, 2));
  rt.block_on(a_second_writer_is_refused());
}

}  // namespace
