// A stream's reads are cancel-safe on every read path: a read that ends cancelled or timed out
// consumed nothing (the bytes the kernel delivered to it anyway come back on the next read), and a
// cancellation is what a cancelled read reports, whatever its socket did meanwhile.
#include <corio/channel.hpp>
#include <corio/join_handle.hpp>
#include <corio/net/tcp_listener.hpp>
#include <corio/net/tcp_stream.hpp>
#include <corio/scope.hpp>
#include <corio/time.hpp>
#include <corio/when_any.hpp>

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <array>
#include <chrono>
#include <string>
#include <variant>

#include "support/net.hpp"

using namespace std::chrono_literals;

namespace {

using corio::net::tcp_stream;
using namespace corio::test;

template <class Backend>
class cancel_safe_read : public backend_test<Backend> {};
TYPED_TEST_SUITE(cancel_safe_read, every_read_path, backend_names);

// Chunk i of a stream: its number, then dots, so a lost or reordered byte shows.
std::string numbered_chunks(char stream, int count) {
  std::string all;
  for (int i = 0; i < count; ++i) {
    all += stream + std::to_string(i) + "........;";
  }
  return all;
}

// Both streams are written at once, so both reads often complete in the same turn, or one is served
// at once from what its stream kept: the one that loses the race has data in its buffer, which its
// stream must keep for the next read.
// With `exact`, the reads are read_exacts of their whole buffer: a task inside, whose last step takes
// its bytes before when_any has decided (detail/read_exact_awaiter.hpp).
corio::task<void> race_two_streams(std::size_t* rounds, bool exact = false) {
  auto [a_writer, a] = co_await connected_pair();
  auto [b_writer, b] = co_await connected_pair();
  std::string a_sent = numbered_chunks('a', 400);
  std::string b_sent = numbered_chunks('b', 400);
  if (exact) {  // whole reads of 16 bytes: a stream ends on one
    a_sent.resize((a_sent.size() + 15) / 16 * 16, '#');
    b_sent.resize((b_sent.size() + 15) / 16 * 16, '#');
  }
  std::string a_got;
  std::string b_got;
  std::size_t sent = 0;
  constexpr std::size_t step = 37;
  while (a_got.size() < a_sent.size() || b_got.size() < b_sent.size()) {
    if (sent < a_sent.size()) {
      std::size_t n = std::min(step, a_sent.size() - sent);
      co_await a_writer.write_all(std::string_view(a_sent).substr(sent, n));
      co_await b_writer.write_all(std::string_view(b_sent).substr(sent, n));
      sent += n;
    }
    std::array<std::byte, 16> a_buffer;
    std::array<std::byte, 16> b_buffer;
    std::variant<std::size_t, std::size_t, std::monostate> first;
    if (exact) {
      first = co_await corio::when_any(a.read_exact(a_buffer), b.read_exact(b_buffer), corio::sleep_for(5s));
    } else {
      first = co_await corio::when_any(a.read_some(a_buffer), b.read_some(b_buffer), corio::sleep_for(5s));
    }
    if (first.index() == 2) {  // both streams silent: bytes were lost (the test would hang otherwise)
      ADD_FAILURE() << "stuck with " << a_got.size() << " and " << b_got.size() << " of " << a_sent.size() << " bytes";
      co_return;
    }
    if (first.index() == 0) {
      a_got += text(std::span(a_buffer).first(std::get<0>(first)));
    } else {
      b_got += text(std::span(b_buffer).first(std::get<1>(first)));
    }
    ++*rounds;
  }
  EXPECT_EQ(a_got, a_sent);
  EXPECT_EQ(b_got, b_sent);
}

TYPED_TEST(cancel_safe_read, the_read_that_loses_a_when_any_keeps_its_bytes_for_the_next_read) {
  std::size_t rounds = 0;
  run_on_loop(TestFixture::backend, [&]() -> corio::task<void> { co_await race_two_streams(&rounds); });
  EXPECT_GT(rounds, 0u);
}

TYPED_TEST(cancel_safe_read, the_read_that_loses_a_when_any_keeps_its_bytes_on_two_workers) {
  corio::runtime rt(runtime_options(TestFixture::backend, 2));
  std::size_t rounds = 0;
  rt.block_on([&]() -> corio::task<void> { co_await race_two_streams(&rounds); }());
  EXPECT_GT(rounds, 0u);
}

TYPED_TEST(cancel_safe_read, the_read_exact_that_loses_a_when_any_keeps_its_bytes_on_two_workers) {
  corio::runtime rt(runtime_options(TestFixture::backend, 2));
  std::size_t rounds = 0;
  rt.block_on([&]() -> corio::task<void> { co_await race_two_streams(&rounds, true); }());
  EXPECT_GT(rounds, 0u);
}

// A read racing a short sleep: whichever wins, no byte of the stream is lost or reordered.
TYPED_TEST(cancel_safe_read, reads_racing_a_sleep_lose_nothing) {
  run_on_loop(TestFixture::backend, []() -> corio::task<void> {
    auto [writer, reader] = co_await connected_pair();
    const std::string sent = numbered_chunks('s', 300);
    auto writing = corio::spawn([](tcp_stream& to, const std::string& data) -> corio::task<void> {
      for (std::size_t at = 0; at < data.size(); at += 29) {
        co_await to.write_all(std::string_view(data).substr(at, 29));
        co_await corio::sleep_for(50us);
      }
    }(writer, sent));
    std::string got;
    while (got.size() < sent.size()) {
      std::array<std::byte, 24> buffer;
      auto read = reader.read_some(buffer);
      auto first = co_await corio::when_any(std::move(read), corio::sleep_for(30us));
      if (first.index() == 0) {
        got += text(std::span(buffer).first(std::get<0>(first)));
      }
    }
    co_await std::move(writing);
    EXPECT_EQ(got, sent);
  });
}

// read_exact under with_timeout in its error_code form: the timeout is reported as one (not as a
// cancellation), it yields 0, and the 3 bytes it had read come back first on the next read_exact.
TYPED_TEST(cancel_safe_read, a_timed_out_read_exact_reports_timed_out_and_gives_its_bytes_back) {
  run_on_loop(TestFixture::backend, []() -> corio::task<void> {
    auto [writer, reader] = co_await connected_pair();
    co_await writer.write_all("abc");
    std::array<char, 8> message{};
    std::error_code error;
    std::size_t got = co_await corio::with_timeout(
        100ms, reader.read_exact(std::as_writable_bytes(std::span(message)), error));
    EXPECT_EQ(error, std::errc::timed_out);
    EXPECT_EQ(got, 0u);
    co_await writer.write_all("defgh");
    got = co_await reader.read_exact(std::as_writable_bytes(std::span(message)), error);
    EXPECT_FALSE(error) << error.message();
    EXPECT_EQ(got, 8u);
    EXPECT_EQ(std::string(message.data(), message.size()), "abcdefgh");
  });
}

// The throwing form times out with corio::timed_out and keeps the bytes too.
TYPED_TEST(cancel_safe_read, a_timed_out_throwing_read_exact_gives_its_bytes_back) {
  run_on_loop(TestFixture::backend, []() -> corio::task<void> {
    auto [writer, reader] = co_await connected_pair();
    co_await writer.write_all("abc");
    std::array<char, 8> message{};
    auto bounded = corio::with_timeout(50ms, reader.read_exact(std::as_writable_bytes(std::span(message))));
    bool timed_out = false;
    try {
      co_await std::move(bounded);
    } catch (const corio::timed_out&) {
      timed_out = true;
    }
    EXPECT_TRUE(timed_out);
    co_await writer.write_all("defgh");
    co_await reader.read_exact(std::as_writable_bytes(std::span(message)));
    EXPECT_EQ(std::string(message.data(), message.size()), "abcdefgh");
  });
}

TYPED_TEST(cancel_safe_read, a_read_into_an_empty_buffer_yields_zero_at_once) {
  run_on_loop(TestFixture::backend, []() -> corio::task<void> {
    auto [writer, reader] = co_await connected_pair();
    std::error_code error;
    auto empty_read = reader.read_some(std::span<std::byte>{}, error);
    std::size_t got = co_await corio::with_timeout(1s, std::move(empty_read));
    EXPECT_EQ(got, 0u);
    EXPECT_FALSE(error) << error.message();
    co_await writer.write_all("x");
    std::array<std::byte, 4> buffer;
    EXPECT_EQ(co_await reader.read_some(buffer), 1u);  // the stream is untouched
  });
}

// An error_code read that loses a when_any says so in its error_code, whether it was waiting when the
// other operand won or started after it had (README, Networking): a task that shares that error_code
// with its writes must not take it for a write's failure. The next read, with data, clears it.
TYPED_TEST(cancel_safe_read, an_error_code_read_that_loses_a_when_any_stores_operation_canceled) {
  run_on_loop(TestFixture::backend, []() -> corio::task<void> {
    auto [writer, reader] = co_await connected_pair();
    std::array<std::byte, 8> buffer;
    std::error_code error;
    auto waited = co_await corio::when_any(reader.read_some(buffer, error), corio::sleep_for(1ms));
    EXPECT_EQ(waited.index(), 1u);
    EXPECT_EQ(error, std::errc::operation_canceled);
    error.clear();
    auto ready = []() -> corio::task<int> { co_return 7; };
    auto started_late = co_await corio::when_any(ready(), reader.read_some(buffer, error));
    EXPECT_EQ(started_late.index(), 0u);
    EXPECT_EQ(error, std::errc::operation_canceled);
    co_await writer.write_all("x");
    EXPECT_EQ(co_await reader.read_some(buffer, error), 1u);
    EXPECT_FALSE(error) << error.message();
  });
}

// A scope is cancelled while one child reads a stream and another owns its peer; the owner's frame
// closes the peer with a reset as the scope cancels. The reader reports the cancellation, never the
// reset its cancellation caused (epoll once tried the read after the stop and saw ECONNRESET).
TYPED_TEST(cancel_safe_read, a_cancelled_read_reports_cancelled_not_the_reset_that_followed) {
  corio::runtime rt(runtime_options(TestFixture::backend, 2));
  rt.block_on([]() -> corio::task<void> {
    for (int round = 0; round < 100; ++round) {
      auto [peer, stream] = co_await connected_pair();
      linger abort_on_close{.l_onoff = 1, .l_linger = 0};
      ::setsockopt(peer.native_handle(), SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof(abort_on_close));
      corio::task_scope scope;
      scope.spawn([](tcp_stream& from) -> corio::task<void> {
        std::array<std::byte, 16> buffer;
        co_await from.read_some(buffer);  // nothing is ever sent
        ADD_FAILURE() << "the read returned";
      }(stream));
      scope.spawn([](tcp_stream owned) -> corio::task<void> {
        EXPECT_TRUE(owned.is_open());
        co_await corio::sleep_for(1h);  // cancelled; its frame then closes `owned` with a reset
      }(std::move(peer)));
      co_await corio::sleep_for(200us);
      scope.cancel();
      try {
        co_await scope.join();
      } catch (const std::exception& e) {
        ADD_FAILURE() << "round " << round << ": " << e.what();
        co_return;
      }
    }
  }());
}

// A read that is always ready (its stream holds more input than the loop asks for) does not starve a
// channel receive raced against it in when_any, which starts its operands in a random order. (In
// argument order, on epoll, where a read is tried at once, a user trial's receive took 1 to 446 of
// 200,000 values.) Every byte and every value arrives once, in order.
TYPED_TEST(cancel_safe_read, a_read_that_is_always_ready_does_not_starve_a_receive_raced_against_it) {
  run_on_loop(TestFixture::backend, []() -> corio::task<void> {
    auto [client, server] = co_await connected_pair();
    constexpr std::size_t input_size = 64 * 1024;
    constexpr int queued = 1000;
    co_await client.write_all(bytes(std::string(input_size, 'x')));
    auto [tx, rx] = corio::channel<int>(queued);
    for (int i = 0; i < queued; ++i) {
      EXPECT_EQ(tx.try_send(i), corio::channel_status::ok);
    }
    std::size_t read = 0;
    int received = 0;
    std::array<std::byte, 64> buffer;
    while (read < input_size && received < queued) {
      auto first = co_await corio::when_any(server.read_some(buffer), rx.recv());
      if (first.index() == 0) {
        read += std::get<0>(first);
      } else {
        EXPECT_EQ(std::get<1>(first), received) << "a value was lost or reordered";
        ++received;
      }
    }
    EXPECT_GT(received, queued / 10) << "the receive starved: " << read << " bytes read first";
    while (read < input_size) {
      read += co_await server.read_some(buffer);
    }
    while (received < queued) {
      EXPECT_EQ(co_await rx.recv(), received) << "a value was lost or reordered";
      ++received;
    }
  });
}

}  // namespace
