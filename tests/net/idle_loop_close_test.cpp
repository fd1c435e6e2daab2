// A socket closed while the event loop that served it is not running (block_on returned; the loop
// is idle, or its thread is blocked elsewhere) gives its port back at once, on both backends, whether
// the close is made on the loop's thread or on another one: a bind on the loop's thread right after
// the close (after joining the closing thread) succeeds. On io_uring the loop's ring may still hold
// requests on the socket (a listener's multishot accept stays armed between accepts; a receive a task
// left waiting): the closing thread cancels them in that ring itself (uring_reactor.cpp, "A socket
// closed on another thread"). Before, the loop kept the socket (its request, or a duplicate of the
// descriptor) until it ran again, and binding the port failed with EADDRINUSE (a user trial).
#include <corio/errors.hpp>
#include <corio/event_loop.hpp>
#include <corio/net/tcp_listener.hpp>
#include <corio/net/tcp_stream.hpp>
#include <corio/net/udp_socket.hpp>
#include <corio/time.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <system_error>
#include <thread>

#include "support/net.hpp"

using namespace std::chrono_literals;

namespace {

using corio::event_loop;
using corio::net::endpoint;
using corio::net::tcp_listener;
using corio::net::tcp_stream;
using corio::net::udp_socket;
using namespace corio::test;

template <class Backend>
class idle_loop_close : public backend_test<Backend> {};
TYPED_TEST_SUITE(idle_loop_close, every_accept_path, backend_names);

/// Accepts one connection on `listener` with `loop`, then returns: the loop stops running, and on
/// io_uring the listener's multishot accept stays armed in its ring.
void accept_one_and_return(event_loop& loop, tcp_listener& listener) {
  loop.block_on([&]() -> corio::task<void> {
    tcp_stream client = co_await tcp_stream::connect(listener.local_endpoint());
    tcp_stream accepted = co_await corio::with_timeout(5s, listener.accept());
  });
}

std::error_code bind_tcp(const endpoint& at) {
  std::error_code error;
  tcp_listener again = tcp_listener::bind(at, {}, error);
  return error;
}

std::error_code bind_udp(const endpoint& at) {
  std::error_code error;
  udp_socket again = udp_socket::bind(at, error);
  return error;
}

/// Leaves `operation(socket)` waiting in `loop`, which then stops running, and closes the socket on
/// another thread: the port binds again (`bind_again`) before the loop runs, and once it runs the
/// operation ends operation_canceled within 5 s.
template <class Socket, class Operation, class Bind>
void close_under_waiting_operation(event_loop& loop, Socket& socket, Operation operation, Bind bind_again) {
  const endpoint at = socket.local_endpoint();
  std::optional<std::error_code> ended;
  loop.spawn([&]() -> corio::task<void> { ended = co_await operation(socket); });
  loop.block_on([]() -> corio::task<void> { co_await corio::sleep_for(5ms); });  // the operation waits
  std::thread([&] { socket.close(); }).join();
  std::error_code bound = bind_again(at);
  EXPECT_FALSE(bound) << bound.message();
  loop.block_on([&]() -> corio::task<void> {
    for (int i = 0; i < 500 && !ended; ++i) {
      co_await corio::sleep_for(10ms);
    }
  });
  ASSERT_TRUE(ended) << "the operation never ended";
  EXPECT_EQ(*ended, std::errc::operation_canceled) << ended->message();
}

TYPED_TEST(idle_loop_close, a_listener_closed_on_its_loop_s_thread_between_runs_frees_its_port) {
  event_loop loop(TestFixture::backend);
  for (int round = 0; round < 3; ++round) {
    tcp_listener listener = tcp_listener::bind(endpoint::loopback_v4(0));
    const endpoint at = listener.local_endpoint();
    accept_one_and_return(loop, listener);
    listener.close();
    std::error_code error = bind_tcp(at);
    EXPECT_FALSE(error) << "round " << round << ": " << error.message();
  }
}

TYPED_TEST(idle_loop_close, a_listener_closed_on_another_thread_between_runs_frees_its_port) {
  event_loop loop(TestFixture::backend);
  tcp_listener listener = tcp_listener::bind(endpoint::loopback_v4(0));
  const endpoint at = listener.local_endpoint();
  accept_one_and_return(loop, listener);
  std::thread([&] { listener.close(); }).join();
  std::error_code error = bind_tcp(at);
  EXPECT_FALSE(error) << error.message();
  // The loop still runs cleanly afterwards, and lets go of what it kept of the listener.
  loop.block_on([]() -> corio::task<void> { co_await corio::sleep_for(1ms); });
}

// A task left waiting in accept when block_on returned: the close ends it operation_canceled when the
// loop runs again, and the port is free before that.
TYPED_TEST(idle_loop_close, a_listener_closed_under_an_accept_its_idle_loop_holds_frees_its_port) {
  event_loop loop(TestFixture::backend);
  tcp_listener listener = tcp_listener::bind(endpoint::loopback_v4(0));
  close_under_waiting_operation(loop, listener, accept_once, bind_tcp);
}

TYPED_TEST(idle_loop_close, a_udp_socket_closed_on_another_thread_between_runs_frees_its_port) {
  event_loop loop(TestFixture::backend);
  udp_socket socket = udp_socket::bind(endpoint::loopback_v4(0));
  const endpoint at = socket.local_endpoint();
  loop.block_on([&]() -> corio::task<void> {
    std::error_code error;
    std::byte buffer[16];
    co_await corio::with_timeout(5ms, socket.recv_from(buffer, error));  // a request in the kernel, ended
  });
  std::thread([&] { socket.close(); }).join();
  std::error_code error = bind_udp(at);
  EXPECT_FALSE(error) << error.message();
}

TYPED_TEST(idle_loop_close, a_udp_socket_closed_under_a_receive_its_idle_loop_holds_frees_its_port) {
  event_loop loop(TestFixture::backend);
  udp_socket socket = udp_socket::bind(endpoint::loopback_v4(0));
  close_under_waiting_operation(loop, socket, receive_once, bind_udp);
}

}  // namespace
