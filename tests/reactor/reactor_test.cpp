// The reactor behind every loop and worker, typed over both backends: which backend ran, the reactor
// wait as the idle wait (cross-thread wake-ups, timers, ~0% CPU when idle), cancellation in the
// kernel, and shutdown with operations in flight.
#include <corio/event_loop.hpp>
#include <corio/io_backend.hpp>
#include <corio/join_handle.hpp>
#include <corio/net/tcp_listener.hpp>
#include <corio/net/tcp_stream.hpp>
#include <corio/runtime.hpp>
#include <corio/time.hpp>
#include <corio/when_all.hpp>
#include <corio/yield.hpp>

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <future>
#include <thread>
#include <vector>

#include "support/net.hpp"

using namespace std::chrono_literals;

namespace {

using corio::io_backend;
using corio::net::endpoint;
using corio::net::tcp_listener;
using corio::net::tcp_stream;
using namespace corio::test;

template <class Backend>
class reactor : public backend_test<Backend> {};
TYPED_TEST_SUITE(reactor, both_backends, backend_names);

// Coroutines take what they use as parameters (copied or referenced from a frame that outlives them):
// a capturing lambda's closure dies at the end of the full expression that spawned it.
corio::task<void> accept_and_echo(tcp_listener& listener, int connections) {
  for (int i = 0; i < connections; ++i) {
    corio::spawn(echo_connection(co_await listener.accept())).detach();
  }
}

corio::task<void> accept_and_hold(tcp_listener& listener) { tcp_stream held = co_await listener.accept(); }

corio::task<std::size_t> read_into(tcp_stream& stream, std::span<std::byte> buffer) {
  co_return co_await stream.read_some(buffer);
}

corio::task<tcp_stream> connect_to(endpoint at) { co_return co_await tcp_stream::connect(at); }

std::chrono::microseconds process_cpu_time() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  auto to_us = [](const timeval& t) { return std::chrono::seconds(t.tv_sec) + std::chrono::microseconds(t.tv_usec); };
  return to_us(usage.ru_utime) + to_us(usage.ru_stime);
}

TYPED_TEST(reactor, the_backend_that_ran_is_the_one_requested) {
  const io_backend wanted = TestFixture::backend;
  io_backend on_loop = io_backend::automatic;
  run_on_loop(wanted, [&]() -> corio::task<void> {
    EXPECT_EQ(corio::current_io_backend(), io_backend::automatic);  // no I/O yet: no reactor
    auto listener = tcp_listener::bind(endpoint::loopback_v4(0));
    auto server = corio::spawn(accept_and_echo(listener, 1));
    EXPECT_EQ(co_await echo_once(listener.local_endpoint(), "which"), "which");
    co_await std::move(server);
    on_loop = corio::current_io_backend();
  });
  EXPECT_EQ(on_loop, wanted);

  // One worker: on two, the root may resume on a worker that has done no I/O yet (no reactor).
  corio::runtime rt(runtime_options(wanted, 1));
  io_backend on_worker = rt.block_on([]() -> corio::task<io_backend> {
    auto listener = tcp_listener::bind(endpoint::loopback_v4(0));
    auto server = corio::spawn(accept_and_echo(listener, 1));
    co_await echo_once(listener.local_endpoint(), "worker");
    co_await std::move(server);
    co_return corio::current_io_backend();
  }());
  EXPECT_EQ(on_worker, wanted);
}

TYPED_TEST(reactor, echo_round_trips_on_a_loop) {
  run_on_loop(TestFixture::backend, []() -> corio::task<void> {
    auto listener = tcp_listener::bind(endpoint::loopback_v4(0));
    auto server = corio::spawn(accept_and_echo(listener, 3));
    std::vector<corio::task<std::string>> clients;
    for (int i = 0; i < 3; ++i) {
      clients.push_back(echo_once(listener.local_endpoint(), "hello " + std::to_string(i)));
    }
    auto replies = co_await corio::when_all(std::move(clients));
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(replies[static_cast<std::size_t>(i)], "hello " + std::to_string(i));
    }
    co_await std::move(server);
  });
}

TYPED_TEST(reactor, echo_round_trips_across_runtime_workers) {
  corio::runtime rt(runtime_options(TestFixture::backend));
  constexpr int clients = 32;
  constexpr int rounds = 20;
  int ok = rt.block_on([]() -> corio::task<int> {
    auto listener = tcp_listener::bind(endpoint::loopback_v4(0));
    auto server = corio::spawn(accept_and_echo(listener, clients));
    std::vector<corio::join_handle<int>> handles;
    for (int c = 0; c < clients; ++c) {
      handles.push_back(corio::spawn([](endpoint server_at, int id) -> corio::task<int> {
        auto stream = co_await tcp_stream::connect(server_at);
        int good = 0;
        for (int r = 0; r < rounds; ++r) {
          std::string message = "client " + std::to_string(id) + " round " + std::to_string(r);
          good += co_await round_trip(stream, message) == message ? 1 : 0;
        }
        co_return good;
      }(listener.local_endpoint(), c)));
    }
    int total = 0;
    for (auto& handle : handles) {
      total += co_await std::move(handle);
    }
    co_await std::move(server);
    co_return total;
  }());
  EXPECT_EQ(ok, clients * rounds);
}

// The loop thread sleeps in its reactor (a read is pending); a post from another thread must wake it.
TYPED_TEST(reactor, a_post_from_another_thread_wakes_a_loop_blocked_in_its_reactor) {
  corio::event_loop loop(TestFixture::backend);
  std::promise<endpoint> listening;
  std::atomic<bool> posted_ran{false};
  auto serve = [&]() -> corio::task<void> {  // named: its captures outlive the coroutine
    auto listener = tcp_listener::bind(endpoint::loopback_v4(0));
    listening.set_value(listener.local_endpoint());
    tcp_stream idle = co_await listener.accept();  // parks the loop in its reactor until stop()
  };
  loop.spawn(serve());
  std::thread runner([&] { loop.run(); });
  endpoint at = listening.get_future().get();
  std::this_thread::sleep_for(50ms);  // let it block
  auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(loop.post([&] { posted_ran = true; }));
  while (!posted_ran && std::chrono::steady_clock::now() - start < 5s) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_TRUE(posted_ran);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  loop.stop();
  runner.join();
  (void)at;
}

// A worker asleep in its reactor is woken by a spawn from a foreign thread.
TYPED_TEST(reactor, a_spawn_from_outside_wakes_workers_blocked_in_their_reactors) {
  corio::runtime rt(runtime_options(TestFixture::backend));
  auto listener_ready = std::make_shared<std::promise<void>>();
  auto pending = rt.spawn([](std::shared_ptr<std::promise<void>> ready) -> corio::task<void> {
    auto listener = tcp_listener::bind(endpoint::loopback_v4(0));
    ready->set_value();
    tcp_stream never = co_await listener.accept();
  }(listener_ready));
  listener_ready->get_future().get();
  std::this_thread::sleep_for(50ms);
  for (int i = 0; i < 20; ++i) {
    auto start = std::chrono::steady_clock::now();
    int value = rt.block_on([]() -> corio::task<int> { co_return 7; }());
    EXPECT_EQ(value, 7);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  }
  pending.cancel();
  EXPECT_THROW(rt.block_on([&]() -> corio::task<void> { co_await std::move(pending); }()), corio::cancelled);
}

// Timers still fire while the thread waits in its reactor: the next deadline is the wait's timeout.
// A worker that never runs out of tasks never parks: it must still reap I/O on its maintenance ticks,
// so a read completes while another task keeps yielding on the only worker.
TYPED_TEST(reactor, a_worker_that_never_parks_still_completes_io) {
  corio::runtime rt(runtime_options(TestFixture::backend, 1));
  bool done = rt.block_on([]() -> corio::task<bool> {
    auto [client, server] = co_await connected_pair();
    std::atomic<bool> read_done{false};
    auto spinner = corio::spawn([](std::atomic<bool>& stop) -> corio::task<bool> {
      for (long turns = 0; turns < 50'000'000; ++turns) {
        if (stop.load(std::memory_order_relaxed)) {
          co_return true;
        }
        co_await corio::yield();
      }
      co_return false;
    }(read_done));
    auto reader = corio::spawn([](tcp_stream& s, std::atomic<bool>& flag) -> corio::task<void> {
      std::byte buffer[8];
      EXPECT_EQ(co_await s.read_some(buffer), 4u);
      flag.store(true, std::memory_order_relaxed);
    }(server, read_done));
    std::thread sender([fd = client.native_handle()] {
      std::this_thread::sleep_for(20ms);  // the reader waits in the reactor by then
      EXPECT_EQ(::send(fd, "ping", 4, MSG_NOSIGNAL), 4);
    });
    co_await std::move(reader);
    bool spun_until_read = co_await std::move(spinner);
    sender.join();
    co_return spun_until_read;
  }());
  EXPECT_TRUE(done) << "the read never completed while the worker was busy";
}

TYPED_TEST(reactor, a_timer_ends_the_reactor_wait) {
  run_on_loop(TestFixture::backend, []() -> corio::task<void> {
    auto listener = tcp_listener::bind(endpoint::loopback_v4(0));
    auto waiting = corio::spawn(accept_and_hold(listener));
    co_await corio::yield();  // the accept is in flight: the reactor exists and backs the idle wait
    auto start = corio::clock::now();
    co_await corio::sleep_for(30ms);
    auto slept = corio::clock::now() - start;
    EXPECT_GE(slept, 30ms);
    EXPECT_LT(slept, 1s);
    waiting.cancel();
    EXPECT_THROW(co_await std::move(waiting), corio::cancelled);
  });
}

// Open sockets, pending reads and an accept: the runtime sleeps in its reactors and burns no CPU.
TYPED_TEST(reactor, an_idle_runtime_with_open_sockets_uses_almost_no_cpu) {
  corio::runtime rt(runtime_options(TestFixture::backend));
  auto ready = std::make_shared<std::promise<void>>();
  auto idle = rt.spawn([](std::shared_ptr<std::promise<void>> ready) -> corio::task<void> {
    // Shared with the accepting task: a cancelled join (below) stops waiting at once, so this frame
    // may be gone while that task still accepts on the listener.
    auto listener = std::make_shared<tcp_listener>(tcp_listener::bind(endpoint::loopback_v4(0)));
    auto accept_forever = [](std::shared_ptr<tcp_listener> on) -> corio::task<void> {
      co_await accept_and_echo(*on, 1'000'000);
    };
    auto accepting = corio::spawn(accept_forever(listener));
    std::vector<tcp_stream> clients;
    for (int i = 0; i < 8; ++i) {
      clients.push_back(co_await tcp_stream::connect(listener->local_endpoint()));
    }
    ready->set_value();
    co_await std::move(accepting);  // never finishes; cancelled below
  }(ready));
  ready->get_future().get();
  std::this_thread::sleep_for(100ms);  // let every worker go idle
  auto cpu_before = process_cpu_time();
  std::this_thread::sleep_for(500ms);
  auto used = process_cpu_time() - cpu_before;
  EXPECT_LT(used, 50ms) << "an idle runtime used " << used.count() << " us of CPU in 500 ms";
  idle.cancel();
  EXPECT_THROW(rt.block_on([&]() -> corio::task<void> { co_await std::move(idle); }()), corio::cancelled);
}

TYPED_TEST(reactor, cancelling_a_task_blocked_in_read_completes_it_with_cancelled) {
  corio::runtime rt(runtime_options(TestFixture::backend));
  rt.block_on([]() -> corio::task<void> {
    auto listener = tcp_listener::bind(endpoint::loopback_v4(0));
    auto client = co_await tcp_stream::connect(listener.local_endpoint());
    tcp_stream server = co_await listener.accept();
    std::byte buffer[16];
    auto reader = corio::spawn(read_into(server, buffer));  // nothing ever arrives
    co_await corio::sleep_for(20ms);
    reader.cancel();
    EXPECT_THROW(co_await std::move(reader), corio::cancelled);
    // The stream is still usable after the cancelled read: the kernel let go of the operation.
    co_await client.write_all(bytes("after"));
    std::string got(5, '\0');
    co_await server.read_exact(std::as_writable_bytes(std::span(got)));
    EXPECT_EQ(got, "after");
  }());
}

TYPED_TEST(reactor, cancelling_a_task_blocked_in_accept_completes_it_with_cancelled) {
  corio::runtime rt(runtime_options(TestFixture::backend));
  rt.block_on([]() -> corio::task<void> {
    auto listener = tcp_listener::bind(endpoint::loopback_v4(0));
    auto acceptor = corio::spawn(accept_and_hold(listener));
    co_await corio::sleep_for(20ms);
    acceptor.cancel();
    EXPECT_THROW(co_await std::move(acceptor), corio::cancelled);
  }());
}

// A connect that cannot finish: the listener's accept queue is full, so the kernel drops the SYN and
// retransmits it for seconds.
TYPED_TEST(reactor, cancelling_a_task_blocked_in_connect_completes_it_with_cancelled) {
  corio::runtime rt(runtime_options(TestFixture::backend));
  rt.block_on([]() -> corio::task<void> {
    corio::net::listen_options options;
    options.backlog = 0;
    auto listener = tcp_listener::bind(endpoint::loopback_v4(0), options);
    std::vector<tcp_stream> fillers;
    std::vector<corio::join_handle<tcp_stream>> connecting;
    for (int i = 0; i < 4; ++i) {
      connecting.push_back(corio::spawn(connect_to(listener.local_endpoint())));
    }
    co_await corio::sleep_for(100ms);
    int finished = 0;
    for (auto& each : connecting) {
      finished += each.is_finished() ? 1 : 0;
    }
    EXPECT_LT(finished, 4) << "every connect finished: the accept queue did not fill";
    for (auto& each : connecting) {
      each.cancel();
    }
    int cancelled = 0;
    for (auto& each : connecting) {
      try {
        fillers.push_back(co_await std::move(each));
      } catch (const corio::cancelled&) {
        ++cancelled;
      }
    }
    EXPECT_GE(cancelled, 1);
  }());
}

TYPED_TEST(reactor, with_timeout_gives_up_on_a_read_and_on_an_accept) {
  run_on_loop(TestFixture::backend, []() -> corio::task<void> {
    auto listener = tcp_listener::bind(endpoint::loopback_v4(0));
    EXPECT_THROW(co_await corio::with_timeout(20ms, listener.accept()), corio::timed_out);
    auto client = co_await tcp_stream::connect(listener.local_endpoint());
    tcp_stream server = co_await corio::with_timeout(1s, listener.accept());
    std::byte buffer[8];
    EXPECT_THROW(co_await corio::with_timeout(20ms, server.read_some(buffer)), corio::timed_out);
    co_await client.write_all(bytes("x"));
    EXPECT_EQ(co_await corio::with_timeout(1s, server.read_some(buffer)), 1u);
  });
}

// The deadline cancels the read in the kernel: the bytes sent afterwards go to the next read, none is
// lost to the timed-out one. The error_code form stores errc::timed_out instead of throwing. On a
// runtime the timer lives on the worker that ran the read.
corio::task<void> timed_out_reads_cancel_the_read(tcp_listener& listener) {
  auto client = co_await tcp_stream::connect(listener.local_endpoint());
  tcp_stream server = co_await corio::with_timeout(1s, listener.accept());
  std::byte buffer[8];
  for (int i = 0; i < 3; ++i) {
    EXPECT_THROW(co_await corio::with_timeout(5ms, server.read_some(buffer)), corio::timed_out);
    std::error_code error;
    EXPECT_EQ(co_await corio::with_timeout(5ms, server.read_some(buffer, error)), 0u);
    EXPECT_EQ(error, std::errc::timed_out);
  }
  co_await client.write_all(bytes("abc"));
  EXPECT_EQ(co_await corio::with_timeout(1s, server.read_some(buffer)), 3u);
  EXPECT_EQ(static_cast<char>(buffer[0]), 'a');
}

TYPED_TEST(reactor, with_timeout_around_a_read_cancels_it_on_a_loop_and_on_a_runtime) {
  run_on_loop(TestFixture::backend, []() -> corio::task<void> {
    auto listener = tcp_listener::bind(endpoint::loopback_v4(0));
    co_await timed_out_reads_cancel_the_read(listener);
  });
  corio::runtime rt(runtime_options(TestFixture::backend));
  rt.block_on([]() -> corio::task<void> {
    auto listener = tcp_listener::bind(endpoint::loopback_v4(0));
    co_await timed_out_reads_cancel_the_read(listener);
  }());
}

// Uncancellable roots (event_loop::spawn) suspended in accept, read and connect when the loop is
// destroyed: the loop cancels and reaps them in the kernel first, then frees the frames (LSan and
// ASan check nothing leaks and the kernel writes into no freed frame).
TYPED_TEST(reactor, a_loop_destroyed_with_operations_in_flight_cancels_them_first) {
  auto loop = std::make_unique<corio::event_loop>(TestFixture::backend);
  auto listener = std::make_shared<tcp_listener>(tcp_listener::bind(endpoint::loopback_v4(0)));
  int started = 0;
  loop->spawn([](std::shared_ptr<tcp_listener> l, int& started) -> corio::task<void> {
    auto client = co_await tcp_stream::connect(l->local_endpoint());
    tcp_stream server = co_await l->accept();
    ++started;
    std::byte buffer[64];
    co_await server.read_some(buffer);  // never completes
  }(listener, started));
  loop->spawn([](std::shared_ptr<tcp_listener> l, int& started) -> corio::task<void> {
    ++started;
    tcp_stream s = co_await l->accept();  // may take the connection above, or wait forever
    std::byte buffer[64];
    co_await s.read_some(buffer);
  }(listener, started));
  loop->run_until_idle();
  for (int i = 0; i < 20 && started < 2; ++i) {
    std::this_thread::sleep_for(5ms);
    loop->run_until_idle();
  }
  loop.reset();
  SUCCEED();
}

// A runtime destroyed with live connections and operations in flight frees everything.
TYPED_TEST(reactor, a_runtime_destroyed_with_live_connections_frees_everything) {
  auto rt = std::make_unique<corio::runtime>(runtime_options(TestFixture::backend));
  auto ready = std::make_shared<std::promise<void>>();
  rt->spawn([](std::shared_ptr<std::promise<void>> ready) -> corio::task<void> {
     auto listener = tcp_listener::bind(endpoint::loopback_v4(0));
     auto server = corio::spawn(accept_and_echo(listener, 1'000'000));
     std::vector<tcp_stream> clients;
     for (int i = 0; i < 16; ++i) {
       clients.push_back(co_await tcp_stream::connect(listener.local_endpoint()));
       co_await clients.back().write_all(bytes("in flight"));
     }
     ready->set_value();
     std::byte buffer[64];
     co_await clients.front().read_some(buffer);
     co_await clients.front().read_some(buffer);  // nothing more: stays in flight
   }(ready))
      .detach();
  ready->get_future().get();
  std::this_thread::sleep_for(20ms);
  rt.reset();
  SUCCEED();
}

}  // namespace
