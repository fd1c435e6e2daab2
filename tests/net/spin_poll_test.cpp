// A worker's zero-timeout polls (its spin before it sleeps, a busy worker's maintenance tick) on every
// read path: a poll after the peer's data arrived delivers the read, with no park in between. What it
// guards: any poll that would skip the kernel (uring_reactor.cpp, "Polls", the rejected variant) must
// still see a completion the kernel queued for this thread while the worker spun.
#include <corio/detail/io_slot.hpp>
#include <corio/join_handle.hpp>
#include <corio/net/tcp_stream.hpp>
#include <corio/runtime.hpp>
#include <corio/yield.hpp>

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <cstddef>

#include "support/net.hpp"

using namespace std::chrono_literals;

namespace {

using corio::net::tcp_stream;
using namespace corio::test;

template <class Backend>
class spin_poll : public backend_test<Backend> {};
TYPED_TEST_SUITE(spin_poll, every_read_path, backend_names);

constexpr std::size_t room = 64;

corio::task<std::size_t> read_into(tcp_stream& stream, std::span<std::byte> buffer) {
  co_return co_await stream.read_some(buffer);
}

// Polls `slot` until `reader` has finished, yielding between polls so a delivered task runs; the worker
// never parks meanwhile (this task is always runnable), so only a poll can deliver. False after `limit`.
corio::task<bool> poll_until(corio::detail::io_slot& slot, const corio::join_handle<std::size_t>& reader,
                             std::chrono::milliseconds limit) {
  const auto give_up = std::chrono::steady_clock::now() + limit;
  while (!reader.is_finished() && std::chrono::steady_clock::now() < give_up) {
    slot.poll(room);
    co_await corio::yield();
  }
  co_return reader.is_finished();
}

TYPED_TEST(spin_poll, data_that_arrives_between_polls_is_delivered_by_the_next_poll) {
  corio::runtime rt(runtime_options(TestFixture::backend, 1));
  rt.block_on([]() -> corio::task<void> {
    auto [client, server] = co_await connected_pair();
    corio::detail::io_slot& slot = *corio::detail::current_io_slot;
    for (int round = 0; round < 50; ++round) {
      std::byte buffer[8];
      auto reader = corio::spawn(read_into(server, buffer));
      for (int i = 0; i < 20 && !reader.is_finished(); ++i) {  // the read goes to the kernel; polls find nothing
        slot.poll(room);
        co_await corio::yield();
      }
      EXPECT_FALSE(reader.is_finished()) << "round " << round << ": a read completed before any data was sent";
      EXPECT_EQ(::send(client.native_handle(), "ping", 4, MSG_NOSIGNAL), 4);  // not through corio: no turn
      EXPECT_TRUE(co_await poll_until(slot, reader, 2s)) << "round " << round << ": no poll delivered the read";
      EXPECT_EQ(co_await std::move(reader), 4u);
    }
  }());
}

}  // namespace
