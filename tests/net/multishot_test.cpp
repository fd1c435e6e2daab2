// Multishot accept and recv (io_uring's io_source, src/io/uring_source.cpp), typed over both
// backends: the behaviour must be the same on epoll, and on io_uring each test also asserts that the
// multishot path ran (the reactor's count of multishot completions grew), so a silent fall back to
// single-shot ops cannot pass for it.
#include <corio/cancellation.hpp>
#include <corio/detail/io_slot.hpp>
#include <corio/event_loop.hpp>
#include <corio/net/tcp_listener.hpp>
#include <corio/net/tcp_stream.hpp>
#include <corio/time.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <stop_token>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "support/net.hpp"

using namespace std::chrono_literals;

namespace {

using corio::net::endpoint;
using corio::net::tcp_listener;
using corio::net::tcp_stream;
using namespace corio::test;

template <class Backend>
class multishot : public backend_test<Backend> {};
TYPED_TEST_SUITE(multishot, multishot_backends, backend_names);

std::uint64_t multishot_completions() { return corio::detail::current_io_slot->multishot_completions(); }

void expect_multishot_ran(corio::io_backend backend, std::uint64_t before) {
  if (backend == corio::io_backend::io_uring) {
    EXPECT_GT(multishot_completions(), before) << "the io_uring test ran without the multishot path";
  }
}

// Reads until `size` bytes arrived, `chunk` bytes at a time at most.
corio::task<std::string> read_all(tcp_stream& stream, std::size_t size, std::size_t chunk) {
  std::string got;
  std::vector<std::byte> buffer(chunk);
  while (got.size() < size) {
    std::size_t n = co_await stream.read_some(buffer);
    if (n == 0) {
      break;
    }
    got += text(std::span<const std::byte>(buffer.data(), n));
  }
  co_return got;
}

std::string pattern(std::size_t size) {
  std::string data(size, '\0');
  for (std::size_t i = 0; i < size; ++i) {
    data[i] = static_cast<char>('a' + (i * 7 + i / 251) % 26);
  }
  return data;
}

// The burst is larger than the multishot accept's queue bound (64): the rest waits in the kernel's
// backlog until accepts drain the queue and re-arm the multishot.
TYPED_TEST(multishot, an_accept_burst_beyond_the_queue_bound_loses_no_connection) {
  run_on_loop(TestFixture::backend, [backend = TestFixture::backend]() -> corio::task<void> {
    auto listener = tcp_listener::bind(endpoint::loopback_v4(0));
    std::uint64_t before = multishot_completions();
    EXPECT_THROW(co_await corio::with_timeout(1ms, listener.accept()), corio::timed_out);  // arms it
    constexpr int burst = 150;
    std::vector<tcp_stream> clients;
    for (int i = 0; i < burst; ++i) {
      clients.push_back(co_await tcp_stream::connect(listener.local_endpoint()));
      co_await clients.back().write_all(bytes(std::to_string(i) + "."));
    }
    co_await corio::sleep_for(20ms);  // every connection has arrived while nobody accepted
    std::vector<bool> seen(burst, false);
    for (int i = 0; i < burst; ++i) {
      auto accept = listener.accept();
      tcp_stream server = co_await corio::with_timeout(2s, std::move(accept));
      std::string id;
      std::byte one[1];
      while (co_await server.read_some(one) == 1 && one[0] != std::byte{'.'}) {
        id += static_cast<char>(one[0]);
      }
      int index = std::stoi(id);
      bool fresh = index >= 0 && index < burst && !seen[static_cast<std::size_t>(index)];
      EXPECT_TRUE(fresh) << id;
      if (fresh) {
        seen[static_cast<std::size_t>(index)] = true;
      }
    }
    expect_multishot_ran(backend, before);
  });
}

TYPED_TEST(multishot, data_that_arrives_before_the_read_in_many_small_chunks_is_delivered_in_order) {
  run_on_loop(TestFixture::backend, [backend = TestFixture::backend]() -> corio::task<void> {
    auto [client, server] = co_await connected_pair();
    std::uint64_t before = multishot_completions();
    std::byte first[1];
    co_await client.write_all(bytes("!"));
    EXPECT_EQ(co_await server.read_some(first), 1u);  // arms the multishot recv
    std::string expected;
    for (int i = 0; i < 300; ++i) {
      std::string piece = std::to_string(i) + ",";
      expected += piece;
      co_await client.write_all(bytes(piece));
      if (i % 50 == 0) {
        co_await corio::sleep_for(1ms);  // separate completions, queued while nobody reads
      }
    }
    client.close();
    co_await corio::sleep_for(5ms);
    std::string got = co_await read_all(server, expected.size() + 1, 7);  // partial copies keep the rest
    EXPECT_EQ(got, expected);
    EXPECT_EQ(co_await server.read_some(first), 0u);  // then end of stream, once the data is out
    expect_multishot_ran(backend, before);
  });
}

// A ring of two buffers runs dry at once: the multishot ends with ENOBUFS and is re-armed by the next
// read; while another stream holds both buffers (data queued, unread), reads are plain recvs.
TYPED_TEST(multishot, a_ring_that_runs_dry_still_delivers_every_byte) {
  ::setenv("CORIO_URING_BUFFERS", "2", 1);
  run_on_loop(TestFixture::backend, [backend = TestFixture::backend]() -> corio::task<void> {
    std::uint64_t before = multishot_completions();
    auto [hog_client, hog] = co_await connected_pair();
    std::byte first[1];
    co_await hog_client.write_all(bytes("!"));
    EXPECT_EQ(co_await hog.read_some(first), 1u);
    co_await hog_client.write_all(bytes(pattern(20000)));
    co_await corio::sleep_for(5ms);  // the hog's multishot took both buffers
    auto [client, server] = co_await connected_pair();
    const std::string small = pattern(5000);
    co_await client.write_all(bytes(small));
    EXPECT_EQ(co_await read_all(server, small.size(), 1000), small);
    EXPECT_EQ(co_await read_all(hog, 20000, 20000), pattern(20000));  // gives the buffers back
    const std::string data = pattern(256 * 1024);
    auto writer = [&]() -> corio::task<void> {
      for (std::size_t at = 0; at < data.size(); at += 1000) {
        co_await client.write_all(bytes(std::string_view(data).substr(at, 1000)));
      }
      client.close();
    };
    co_await client.write_all(bytes("!"));
    EXPECT_EQ(co_await server.read_some(first), 1u);  // arms the multishot recv
    auto sending = corio::spawn(writer());
    co_await corio::sleep_for(5ms);  // the multishot fills both buffers and ends with ENOBUFS
    std::string got = co_await read_all(server, data.size() + 1, 3000);
    co_await std::move(sending);
    EXPECT_EQ(got.size(), data.size());
    EXPECT_TRUE(got == data) << "the bytes arrived out of order or changed";
    expect_multishot_ran(backend, before);
  });
  ::unsetenv("CORIO_URING_BUFFERS");
}

TYPED_TEST(multishot, cancelled_read_and_accept_leave_the_socket_usable) {
  run_on_loop(TestFixture::backend, [backend = TestFixture::backend]() -> corio::task<void> {
    auto listener = tcp_listener::bind(endpoint::loopback_v4(0));
    auto client = co_await tcp_stream::connect(listener.local_endpoint());
    tcp_stream server = co_await listener.accept();
    std::uint64_t before = multishot_completions();
    std::byte buffer[16];
    EXPECT_THROW(co_await corio::with_timeout(2ms, server.read_some(buffer)), corio::timed_out);
    EXPECT_THROW(co_await corio::with_timeout(2ms, listener.accept()), corio::timed_out);
    co_await client.write_all(bytes("after"));
    EXPECT_EQ(co_await read_all(server, 5, 16), "after");
    auto second = co_await tcp_stream::connect(listener.local_endpoint());
    tcp_stream accepted = co_await listener.accept();
    co_await second.write_all(bytes("x"));
    EXPECT_EQ(co_await read_all(accepted, 1, 16), "x");
    expect_multishot_ran(backend, before);
  });
}

// An event loop run on a thread that then exits: the kernel cancels the multishot accept and recv
// that thread submitted (io_uring ties requests to their submitting task). The loop's next run, on
// another thread, must accept and read as if nothing happened: the kernel's cancel is nobody's
// error (a user trial: that run's first accept failed with operation_canceled).
TYPED_TEST(multishot, a_loop_run_again_after_its_first_thread_exited_still_accepts_and_reads) {
  corio::event_loop loop(TestFixture::backend);
  auto listener = tcp_listener::bind(endpoint::loopback_v4(0));
  tcp_stream client;
  tcp_stream server;
  std::thread([&] {
    loop.block_on([&]() -> corio::task<void> {
      client = co_await tcp_stream::connect(listener.local_endpoint());
      server = co_await listener.accept();  // arms the listener's multishot accept
      co_await client.write_all(bytes("one"));
      EXPECT_EQ(co_await read_all(server, 3, 16), "one");  // arms the stream's multishot recv
    });
  }).join();
  loop.block_on([&, backend = TestFixture::backend]() -> corio::task<void> {
    std::uint64_t before = multishot_completions();
    auto second = co_await tcp_stream::connect(listener.local_endpoint());
    tcp_stream accepted = co_await listener.accept();
    co_await second.write_all(bytes("two"));
    EXPECT_EQ(co_await read_all(accepted, 3, 16), "two");
    co_await client.write_all(bytes("three"));
    EXPECT_EQ(co_await read_all(server, 5, 16), "three");
    expect_multishot_ran(backend, before);
  });
}

// A read whose task was cancelled before it started, under with_timeout: the deadline is offered to
// the read first, then the read finds the cancellation and never reaches the reactor. Closing that
// stream must leave the loop's other multishot states listed, so that the loop's teardown still
// orphans the kept stream's (LeakSanitizer checks what that stream, closed after its loop, leaves).
TYPED_TEST(multishot, a_stream_whose_only_read_was_cancelled_before_it_started_closes_cleanly) {
  tcp_stream kept_client;
  tcp_stream kept_server;
  {
    corio::event_loop loop(TestFixture::backend);
    run_on(loop, [&]() -> corio::task<void> {
      std::byte buffer[4];
      std::tie(kept_client, kept_server) = co_await connected_pair();
      co_await kept_client.write_all(bytes("x"));
      EXPECT_EQ(co_await kept_server.read_some(buffer), 1u);  // its state lives in this loop's reactor
      auto [client, server] = co_await connected_pair();
      co_await corio::sleep_for(2ms);  // the pairs' listeners have left the reactor: the kept stream's state is alone
      auto read_under_deadline = [](tcp_stream& stream) -> corio::task<void> {
        std::byte into[4];
        co_await corio::with_timeout(1s, stream.read_some(into));
      };
      std::stop_source stopped;
      stopped.request_stop();
      EXPECT_THROW(co_await corio::with_stop_token(stopped.get_token(), read_under_deadline(server)), corio::cancelled);
      server.close();
      co_await corio::sleep_for(2ms);  // loop turns after the close
      co_await kept_client.write_all(bytes("y"));
      EXPECT_EQ(co_await kept_server.read_some(buffer), 1u);
    });
  }
  kept_server.close();
  kept_client.close();
}

// Destroying the loop with multishots armed, data and a connection queued, a read and an accept
// parked: the shutdown cancels them in the kernel and frees every source (LeakSanitizer checks);
// the sockets, destroyed after their loop, find their sources orphaned.
TYPED_TEST(multishot, destroying_the_loop_with_multishot_armed_frees_everything) {
  tcp_listener listener;
  std::vector<tcp_stream> streams;
  auto parked_read = [&]() -> corio::task<void> {
    std::byte buffer[64];
    for (;;) {
      co_await streams[2].read_some(buffer);
    }
  };
  auto parked_accept = [&]() -> corio::task<void> {
    for (;;) {
      co_await listener.accept();
    }
  };
  {
    corio::event_loop loop(TestFixture::backend);
    run_on(loop, [&]() -> corio::task<void> {
      listener = tcp_listener::bind(endpoint::loopback_v4(0));
      auto [client, server] = co_await connected_pair();
      std::byte buffer[4];
      co_await client.write_all(bytes("x"));
      co_await server.read_some(buffer);          // arms the multishot recv
      co_await client.write_all(bytes("queued"));  // kept in the ring, never read
      EXPECT_THROW(co_await corio::with_timeout(1ms, listener.accept()), corio::timed_out);
      streams.push_back(co_await tcp_stream::connect(listener.local_endpoint()));  // queued accept
      streams.push_back(std::move(client));
      streams.push_back(std::move(server));
      co_await corio::sleep_for(2ms);
      auto reader = parked_read();
      auto acceptor = parked_accept();
      corio::spawn(std::move(reader)).detach();
      corio::spawn(std::move(acceptor)).detach();
      co_await corio::sleep_for(2ms);  // both parked on their sources, multishots armed
    });
  }
  streams.clear();
  listener.close();
}

// A loop that accepted on a listener is destroyed while the listener lives on: the connections its
// multishot accept had taken and nobody accepted yet were closed with it (their clients saw a reset)
// though the listener was still open (a review). The next loop's accepts get them.
TYPED_TEST(multishot, connections_accepted_for_a_listener_outlive_the_loop_that_took_them) {
  tcp_listener listener;
  std::vector<tcp_stream> clients;
  {
    corio::event_loop first(TestFixture::backend);
    run_on(first, [&]() -> corio::task<void> {
      listener = tcp_listener::bind(endpoint::loopback_v4(0));
      EXPECT_THROW(co_await corio::with_timeout(1ms, listener.accept()), corio::timed_out);  // arms it
      for (int i = 0; i < 3; ++i) {
        clients.push_back(co_await tcp_stream::connect(listener.local_endpoint()));
        co_await clients.back().write_all(bytes("hello"));
      }
      co_await corio::sleep_for(20ms);  // taken by the multishot accept, queued, not accepted
    });
  }
  run_on_loop(TestFixture::backend, [&]() -> corio::task<void> {
    for (int i = 0; i < 3; ++i) {
      auto accept = listener.accept();
      tcp_stream server = co_await corio::with_timeout(2s, std::move(accept));
      std::byte buffer[5];
      EXPECT_EQ(co_await server.read_exact(buffer), 5u);
    }
  });
  listener.close();
}

// A stream destroyed off its loop's thread only shuts its socket down; the loop frees the source at
// the multishot's last completion (LeakSanitizer checks), and the peer sees end of stream.
TYPED_TEST(multishot, a_stream_released_on_another_thread_is_freed_by_its_loop) {
  run_on_loop(TestFixture::backend, []() -> corio::task<void> {
    auto [client, server] = co_await connected_pair();
    std::byte buffer[4];
    co_await client.write_all(bytes("x"));
    co_await server.read_some(buffer);  // arms the multishot recv
    std::thread([&server] { server.close(); }).join();
    EXPECT_EQ(co_await corio::with_timeout(2s, client.read_some(buffer)), 0u);
  });
}

std::size_t registered_files() { return corio::detail::current_io_slot->registered_files(); }

// On io_uring a stream with a source sends and receives through the registered file table. Closing it
// must take it out of the table: otherwise the table keeps the file, and the connection, open.
TYPED_TEST(multishot, a_stream_in_the_registered_file_table_leaves_it_when_closed_here_or_elsewhere) {
  std::size_t per_stream = TestFixture::backend == corio::io_backend::io_uring ? 1 : 0;
  run_on_loop(TestFixture::backend, [per_stream]() -> corio::task<void> {
    std::byte buffer[16];
    for (bool elsewhere : {false, true}) {
      auto [client, server] = co_await connected_pair();
      std::size_t before = registered_files();
      co_await client.write_all(bytes("ping"));
      EXPECT_EQ(co_await server.read_some(buffer), 4u);  // creates the source and registers the socket
      EXPECT_EQ(registered_files(), before + per_stream);
      co_await server.write_all(bytes("pong"));  // through the registered file on io_uring
      EXPECT_EQ(co_await read_all(client, 4, 16), "pong");
      EXPECT_EQ(registered_files(), before + 2 * per_stream);
      if (elsewhere) {
        std::thread([&server] { server.close(); }).join();
      } else {
        server.close();
      }
      EXPECT_EQ(co_await corio::with_timeout(2s, client.read_some(buffer)), 0u) << "the peer never saw the close";
      // Closed elsewhere, the loop lets go at the multishot's last CQE.
      EXPECT_EQ(co_await registered_files_settled_at(before + per_stream), before + per_stream)
          << (elsewhere ? "closed on another thread" : "closed here");
      client.close();
      EXPECT_EQ(registered_files(), before);
    }
  });
}

// Closed on another thread once its multishot has ended (here at the peer's end of file; also when the
// buffer ring ran dry), no CQE will come to tell the loop: the close itself does (fd_records.hpp).
TYPED_TEST(multishot, a_stream_closed_on_another_thread_after_its_multishot_ended_leaves_the_table_at_once) {
  std::size_t per_stream = TestFixture::backend == corio::io_backend::io_uring ? 1 : 0;
  run_on_loop(TestFixture::backend, [per_stream]() -> corio::task<void> {
    std::byte buffer[16];
    auto [client, server] = co_await connected_pair();
    std::size_t before = registered_files();
    co_await client.write_all(bytes("ping"));
    EXPECT_EQ(co_await server.read_some(buffer), 4u);  // creates the source, registers the socket, arms the multishot
    EXPECT_EQ(registered_files(), before + per_stream);
    client.close();
    EXPECT_EQ(co_await corio::with_timeout(2s, server.read_some(buffer)), 0u);  // end of file ends the multishot
    std::thread([&server] { server.close(); }).join();
    EXPECT_EQ(co_await registered_files_settled_at(before), before)
        << "the loop kept the socket closed on another thread";
  });
}

// A one-worker runtime keeps each socket on its worker and uses the multishot ops (two workers:
// multishot_workers_test.cpp).
TYPED_TEST(multishot, a_one_worker_runtime_uses_multishot_ops) {
  corio::runtime rt(runtime_options(TestFixture::backend, 1));
  auto body = []() -> corio::task<std::uint64_t> {
    std::uint64_t before = multishot_completions();
    auto [client, server] = co_await connected_pair();
    for (int i = 0; i < 20; ++i) {
      co_await client.write_all(bytes("ping"));
      EXPECT_EQ(co_await read_all(server, 4, 16), "ping");
    }
    co_return multishot_completions() - before;
  };
  std::uint64_t taken = rt.block_on(body());
  if (TestFixture::backend == corio::io_backend::io_uring) {
    EXPECT_GT(taken, 0u);
  } else {
    EXPECT_EQ(taken, 0u);
  }
}

}  // namespace
