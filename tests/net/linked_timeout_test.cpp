// with_timeout around socket operations, typed over both backends. On io_uring a single-shot op takes
// the deadline as a linked timeout (io_op.hpp, "Linked deadlines"; multi-worker runtimes, sends, UDP);
// multishot reads and epoll keep the timer. The behaviour must be the same either way, and the tests
// that name a path check the reactor's count of linked timeouts, so a silent fall back cannot pass.
#include <corio/detail/io_slot.hpp>
#include <corio/errors.hpp>
#include <corio/event_loop.hpp>
#include <corio/join_handle.hpp>
#include <corio/net/tcp_listener.hpp>
#include <corio/net/tcp_stream.hpp>
#include <corio/net/udp_socket.hpp>
#include <corio/runtime.hpp>
#include <corio/time.hpp>
#include <corio/when_all.hpp>

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <random>
#include <system_error>
#include <thread>
#include <utility>
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
class linked_timeout : public backend_test<Backend> {};
TYPED_TEST_SUITE(linked_timeout, every_read_path, backend_names);

std::uint64_t linked_timeouts() { return corio::detail::current_io_slot->linked_timeouts(); }

TYPED_TEST(linked_timeout, a_read_on_a_two_worker_runtime_times_out_and_the_stream_stays_usable) {
  corio::runtime rt(runtime_options(TestFixture::backend));
  rt.block_on([]() -> corio::task<void> {
    auto [client, server] = co_await connected_pair();
    std::byte buffer[16];
    EXPECT_THROW(co_await corio::with_timeout(20ms, server.read_some(buffer)), corio::timed_out);
    std::error_code error;
    EXPECT_EQ(co_await corio::with_timeout(20ms, server.read_some(buffer, error)), 0u);  // no throw in this form
    EXPECT_EQ(error, std::make_error_code(std::errc::timed_out)) << error.message();
    co_await client.write_all(bytes("ping"));
    std::size_t n = co_await corio::with_timeout(5s, server.read_some(buffer));
    EXPECT_EQ(text(std::span<const std::byte>(buffer, n)), "ping");
  }());
}

// Data that is already there wins over any deadline: never a spurious timed_out.
TYPED_TEST(linked_timeout, a_read_whose_data_is_waiting_never_times_out) {
  corio::runtime rt(runtime_options(TestFixture::backend));
  rt.block_on([]() -> corio::task<void> {
    auto [client, server] = co_await connected_pair();
    for (int i = 0; i < 200; ++i) {
      const std::byte sent[1] = {static_cast<std::byte>(i)};
      co_await client.write_all(sent);
      std::byte got[4];
      std::size_t n = co_await corio::with_timeout(200ms, server.read_some(got));
      EXPECT_EQ(n, 1u);
      EXPECT_EQ(got[0], sent[0]);
    }
  }());
}

// A deadline already passed when the read starts: bytes that were waiting still come back. On an
// event loop a stream's read takes the timer path on every backend; on io_uring the timer fires before
// the loop submits the read, and the kernel completes it with the bytes before its cancel arrives.
// Those bytes went back to the stream's stash and the read said timed_out, every time.
TYPED_TEST(linked_timeout, a_read_under_a_passed_deadline_returns_the_data_already_waiting) {
  run_on_loop(TestFixture::backend, []() -> corio::task<void> {
    auto [client, server] = co_await connected_pair();
    for (int i = 0; i < 10; ++i) {
      const std::byte sent[1] = {static_cast<std::byte>(i)};
      co_await client.write_all(sent);
      co_await corio::sleep_for(5ms);  // loopback queues it within the send; this only leaves a margin
      std::byte got[4];
      std::error_code error;
      std::size_t n = co_await corio::with_timeout(0ms, server.read_some(got, error));
      EXPECT_EQ(error.value(), 0) << "round " << i << ": " << error.message();
      EXPECT_EQ(n, 1u) << "round " << i;
      EXPECT_EQ(got[0], sent[0]) << "round " << i;
    }
  });
}

// The writer's byte lands around the reader's deadline: each round ends either with the byte or with
// timed_out and then the byte on a later read; no byte is lost, doubled or reordered.
TYPED_TEST(linked_timeout, a_read_racing_its_deadline_loses_no_data) {
  corio::runtime rt(runtime_options(TestFixture::backend));
  rt.block_on([]() -> corio::task<void> {
    auto [client, server] = co_await connected_pair();
    for (int i = 0; i < 200; ++i) {
      const std::byte sent[1] = {static_cast<std::byte>(i)};
      auto write_later = [](tcp_stream& s, std::span<const std::byte> b, int round) -> corio::task<void> {
        co_await corio::sleep_for(std::chrono::microseconds(250 * (round % 8)));
        co_await s.write_all(b);
      };
      auto writer = corio::spawn(write_later(client, sent, i));
      std::byte got[4];
      std::size_t n = 0;
      for (bool done = false; !done;) {
        try {
          n = co_await corio::with_timeout(1ms, server.read_some(got));
          done = true;
        } catch (const corio::timed_out&) {
        }
      }
      EXPECT_EQ(n, 1u);
      EXPECT_EQ(got[0], sent[0]);
      co_await std::move(writer);
    }
  }());
}

TYPED_TEST(linked_timeout, outer_cancellation_during_a_deadline_throws_cancelled_not_timed_out) {
  corio::runtime rt(runtime_options(TestFixture::backend));
  rt.block_on([]() -> corio::task<void> {
    auto [client, server] = co_await connected_pair();
    auto read_long = [](tcp_stream& s) -> corio::task<void> {
      std::byte buffer[16];
      co_await corio::with_timeout(10s, s.read_some(buffer));
    };
    auto reader = corio::spawn(read_long(server));
    co_await corio::sleep_for(20ms);
    reader.cancel();
    EXPECT_THROW(co_await std::move(reader), corio::cancelled);
    co_await client.write_all(bytes("after"));
    std::byte buffer[16];
    std::size_t n = co_await server.read_some(buffer);
    EXPECT_EQ(text(std::span<const std::byte>(buffer, n)), "after");
  }());
}

// The deadline passes while the loop's thread is blocked, so neither the kernel's cancellation of the
// receive nor the timer is acted on before the task is cancelled: the outer cancellation wins.
TYPED_TEST(linked_timeout, an_outer_cancel_after_the_deadline_passed_but_before_resumption_wins) {
  run_on_loop(TestFixture::backend, []() -> corio::task<void> {
    auto socket = udp_socket::bind(endpoint::loopback_v4(0));
    auto receive = [](udp_socket& s) -> corio::task<void> {
      std::byte buffer[64];
      co_await corio::with_timeout(400ms, s.recv_from(buffer));  // long enough for a loaded machine's 1 ms sleep
    };
    auto reader = corio::spawn(receive(socket));
    co_await corio::sleep_for(1ms);       // the loop turns: the receive and its deadline are submitted
    std::this_thread::sleep_for(500ms);  // the deadline passes; the loop cannot reap meanwhile
    reader.cancel();
    EXPECT_THROW(co_await std::move(reader), corio::cancelled);
  });
}

// The error_code forms under a deadline store errc::timed_out and with_timeout returns normally, on
// the linked path (a UDP receive) and the timer path (an accept) alike; a user trial found them
// storing operation_canceled, so a timeout could not be told from a cancellation.
TYPED_TEST(linked_timeout, error_code_forms_store_timed_out_when_the_deadline_passes) {
  run_on_loop(TestFixture::backend, []() -> corio::task<void> {
    auto socket = udp_socket::bind(endpoint::loopback_v4(0));
    std::byte buffer[64];
    std::error_code error;
    corio::net::datagram got = co_await corio::with_timeout(20ms, socket.recv_from(buffer, error));
    EXPECT_EQ(got.size, 0u);
    EXPECT_EQ(error, std::make_error_code(std::errc::timed_out)) << "recv_from: " << error.message();
    auto listener = tcp_listener::bind(endpoint::loopback_v4(0));
    error.clear();
    tcp_stream accepted = co_await corio::with_timeout(20ms, listener.accept(error));
    EXPECT_FALSE(accepted.is_open());
    EXPECT_EQ(error, std::make_error_code(std::errc::timed_out)) << "accept: " << error.message();
  });
}

// On an event loop a UDP receive is a single-shot op (linked on io_uring); a TCP read takes the timer
// path, whether a single-shot recv or the stream's multishot recv serves it (uring_reactor.hpp,
// can_link_deadline); epoll always takes the timer path.
TYPED_TEST(linked_timeout, io_uring_links_single_shot_ops_and_keeps_the_timer_for_the_rest) {
  run_on_loop(TestFixture::backend, [backend = TestFixture::backend]() -> corio::task<void> {
    const bool uring = backend == corio::io_backend::io_uring;
    auto socket = udp_socket::bind(endpoint::loopback_v4(0));
    auto [client, server] = co_await connected_pair();
    std::byte buffer[64];
    std::uint64_t before = linked_timeouts();
    EXPECT_THROW(co_await corio::with_timeout(20ms, socket.recv_from(buffer)), corio::timed_out);
    EXPECT_EQ(linked_timeouts(), before + (uring ? 1 : 0));
    co_await client.write_all(bytes("x"));
    EXPECT_EQ(co_await server.read_some(buffer), 1u);  // a multishot recv is armed from here on
    before = linked_timeouts();
    EXPECT_THROW(co_await corio::with_timeout(20ms, server.read_some(buffer)), corio::timed_out);
    EXPECT_EQ(linked_timeouts(), before) << "a stream's read took a linked timeout";
    co_await client.write_all(bytes("after"));
    EXPECT_EQ(co_await corio::with_timeout(5s, server.read_some(buffer)), 5u) << "the stream stays usable";
  });
}

// A reader drains 4 MiB and stops: the whole write goes out in many re-issued sends, then stalls. Every
// re-issue must keep the deadline (else the write would hang), and the bytes reported are exactly the
// bytes the peer can read.
TYPED_TEST(linked_timeout, a_whole_write_keeps_its_deadline_across_reissued_sends) {
  run_on_loop(TestFixture::backend, [backend = TestFixture::backend]() -> corio::task<void> {
    auto [client, server] = co_await connected_pair();
    constexpr std::size_t drained = 4 * 1024 * 1024;
    auto drain = [](tcp_stream& s) -> corio::task<void> {
      std::vector<std::byte> sink(drained);
      co_await s.read_exact(sink);
    };
    auto reader = corio::spawn(drain(client));
    const std::vector<std::byte> data(64 * 1024 * 1024, std::byte{7});
    std::uint64_t before = linked_timeouts();
    std::error_code error;
    std::size_t sent = co_await corio::with_timeout(300ms, server.write_all(data, error));
    co_await std::move(reader);
    EXPECT_EQ(error, std::make_error_code(std::errc::timed_out)) << error.message();
    EXPECT_GT(sent, drained);
    EXPECT_LT(sent, data.size());
    if (backend == corio::io_backend::io_uring) {
      EXPECT_GT(linked_timeouts(), before + 1) << "the re-issued sends carried no linked timeout";
    }
    std::vector<std::byte> rest(sent - drained);
    EXPECT_EQ(co_await client.read_exact(rest), rest.size());
    std::byte extra[16];
    EXPECT_THROW(co_await corio::with_timeout(100ms, client.read_some(extra)), corio::timed_out);
    EXPECT_THROW(co_await corio::with_timeout(20ms, server.write_all(data)), corio::timed_out);
  });
}

// More linked pairs in one go than the submission queue holds (256 entries, two per op, all started
// inline by when_all): the queue is flushed between pairs, never inside one, or a receive would lose
// its deadline and the outer with_timeout would fire instead.
TYPED_TEST(linked_timeout, more_linked_pairs_than_the_submission_queue_holds_all_time_out) {
  run_on_loop(TestFixture::backend, []() -> corio::task<void> {
    constexpr int count = 300;
    std::vector<udp_socket> sockets;
    for (int i = 0; i < count; ++i) {
      sockets.push_back(udp_socket::bind(endpoint::loopback_v4(0)));
    }
    auto receive = [](udp_socket& s) -> corio::task<int> {
      std::byte buffer[64];
      bool timed_out = false;
      try {
        co_await corio::with_timeout(100ms, s.recv_from(buffer));
      } catch (const corio::timed_out&) {
        timed_out = true;
      }
      co_return timed_out ? 1 : 0;
    };
    // One plain SQE first (a datagram to a socket nobody waits on), so the pairs start at an odd
    // offset and one of them meets the end of the queue with a single entry left.
    auto sink = udp_socket::bind(endpoint::loopback_v4(0));
    auto send_one = [](udp_socket& from, endpoint to) -> corio::task<int> {
      co_await from.send_to(bytes("x"), to);
      co_return 0;
    };
    std::vector<corio::task<int>> all;
    all.push_back(send_one(sink, sink.local_endpoint()));
    for (udp_socket& s : sockets) {
      all.push_back(receive(s));
    }
    std::vector<int> results = co_await corio::with_timeout(10s, corio::when_all(std::move(all)));
    EXPECT_EQ(std::accumulate(results.begin(), results.end(), 0), count);
  });
}

corio::task<void> receive_within(udp_socket& socket, std::chrono::microseconds deadline) {
  std::byte buffer[64];
  std::error_code error;
  co_await corio::with_timeout(deadline, socket.recv_from(buffer, error));
}

// Several receives wait on one socket and a datagram wakes them all: one takes it, and the kernel
// re-arms the others' polls. A linked timeout that fires in that window cancels nothing (its CQE says
// ENOENT) and, left there, the receive waited in the kernel with no deadline until the next datagram
// (a user trial's accept loop, which has the same shape, hung for good). Each round's receives must
// all end near their deadlines; one that outlives them by seconds is cut short by the outer timeout
// and counted.
TYPED_TEST(linked_timeout, receives_woken_together_near_their_deadlines_all_end) {
  run_on_loop(TestFixture::backend, []() -> corio::task<void> {
    auto socket = udp_socket::bind(endpoint::loopback_v4(0));
    const endpoint to = socket.local_endpoint();
    const int sender = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    std::minstd_rand random(7);
    int outlived = 0;
    int rounds = 0;
    for (; rounds < 400 && outlived == 0; ++rounds) {
      std::vector<corio::join_handle<void>> receivers;
      for (int i = 0; i < 8; ++i) {
        receivers.push_back(corio::spawn(receive_within(socket, std::chrono::microseconds(10 + random() % 150))));
      }
      const auto send_at = std::chrono::steady_clock::now() + std::chrono::microseconds(random() % 150);
      std::thread send([&] {
        while (std::chrono::steady_clock::now() < send_at) {
        }
        for (int k = 0; k < 3; ++k) {
          ::sendto(sender, "x", 1, 0, to.data(), to.size());
        }
      });
      for (auto& receiver : receivers) {
        try {
          co_await corio::with_timeout(2s, std::move(receiver));
        } catch (const corio::timed_out&) {
          ++outlived;
        }
      }
      send.join();
    }
    ::close(sender);
    EXPECT_EQ(outlived, 0) << "a receive outlived its deadline by seconds (round " << rounds << ")";
  });
}

corio::task<void> receive_for_long(udp_socket socket) {
  std::byte buffer[64];
  co_await corio::with_timeout(10s, socket.recv_from(buffer));
}

// The loop's destructor reaps the ops with their timeouts still armed, then destroys the frames.
TYPED_TEST(linked_timeout, a_loop_destroyed_with_linked_timeouts_armed_frees_everything) {
  std::uint64_t armed = 0;
  {
    corio::event_loop loop(TestFixture::backend);
    for (int i = 0; i < 8; ++i) {
      loop.spawn(receive_for_long(udp_socket::bind(endpoint::loopback_v4(0))));
    }
    auto stop_soon = [](corio::event_loop& l, std::uint64_t& count) -> corio::task<void> {
      co_await corio::sleep_for(20ms);
      count = linked_timeouts();
      l.stop();
    };
    loop.spawn(stop_soon(loop, armed));
    loop.run();
  }
  EXPECT_EQ(armed, TestFixture::backend == corio::io_backend::io_uring ? 8u : 0u);
}

// The runtime's shutdown cancels each reader (ASYNC_CANCEL racing its linked timeout), then reaps.
TYPED_TEST(linked_timeout, a_runtime_destroyed_with_linked_timeouts_armed_frees_everything) {
  corio::runtime rt(runtime_options(TestFixture::backend));
  rt.block_on([]() -> corio::task<void> {
    for (int i = 0; i < 8; ++i) {
      auto [client, server] = co_await connected_pair();
      auto read_long = [](tcp_stream, tcp_stream s) -> corio::task<void> {  // holds the peer open too
        std::byte buffer[16];
        co_await corio::with_timeout(10s, s.read_some(buffer));
      };
      corio::spawn(read_long(std::move(client), std::move(server))).detach();
    }
    co_await corio::sleep_for(20ms);
  }());
}

}  // namespace
