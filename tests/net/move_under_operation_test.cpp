// Moving a socket object while one of its operations is in flight (into a vector that grows, out of
// a unique_ptr that is then reset) leaves the operation working: what an operation points at lives
// off the object and moves with it (tcp_stream.hpp, "Moving"). Before, the operation kept pointers into
// the object it was started on: a write_all's later sends (io_uring), and a cancelled read's or
// receive's bytes, reached freed memory (ASan: heap-use-after-free).
#include <corio/errors.hpp>
#include <corio/join_handle.hpp>
#include <corio/net/tcp_listener.hpp>
#include <corio/net/tcp_stream.hpp>
#include <corio/net/udp_socket.hpp>
#include <corio/time.hpp>

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <system_error>
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
class move_under_operation : public backend_test<Backend> {};
TYPED_TEST_SUITE(move_under_operation, every_read_path, backend_names);

/// Moves `*owned` into `into` and frees the object it was in.
template <class Socket>
void move_and_free(std::unique_ptr<Socket>& owned, Socket& into) {
  into = std::move(*owned);
  owned.reset();
}

/// Writes `message` on `from` and reads it back on `to`.
corio::task<std::string> round_trip_from(tcp_stream& from, tcp_stream& to, std::string message) {
  co_await from.write_all(bytes(message));
  std::string got(message.size(), '\0');
  co_await to.read_exact(std::as_writable_bytes(std::span(got)));
  co_return got;
}

TYPED_TEST(move_under_operation, a_write_all_goes_on_after_its_stream_is_moved_and_the_old_object_freed) {
  run_on_loop(TestFixture::backend, []() -> corio::task<void> {
    auto [client, server] = co_await connected_pair();
    co_await client.write_all(bytes("x"));  // the server reads once: on io_uring its sends then use a registered file
    std::byte first[1];
    co_await server.read_some(first);
    auto owned = std::make_unique<tcp_stream>(std::move(server));
    std::vector<std::byte> data(8 * 1024 * 1024, std::byte{'x'});
    auto writer = corio::spawn(write_everything(*owned, data));
    co_await corio::sleep_for(20ms);
    EXPECT_FALSE(writer.is_finished()) << "the send buffer did not fill: nothing was left to send after the move";
    tcp_stream moved;
    move_and_free(owned, moved);
    std::vector<std::byte> received(data.size());
    co_await corio::with_timeout(10s, client.read_exact(received));
    EXPECT_EQ(received, data);
    std::error_code error = co_await corio::with_timeout(5s, std::move(writer));
    EXPECT_FALSE(error) << error.message();
    EXPECT_EQ(co_await corio::with_timeout(5s, round_trip_from(moved, client, "after")), "after");
  });
}

/// Both reads are parked, then both complete in one turn, the wake-up's first: this cancels the reader
/// and moves its socket away before the reader resumes with what it received, which the socket keeps
/// for its next read (read_stash.hpp, datagram_stash.hpp).
template <class Socket>
corio::task<void> move_on_wake(tcp_stream& wake, corio::join_handle<std::error_code>& reader,
                               std::unique_ptr<Socket>& owned, Socket& into) {
  std::byte one[1];
  co_await wake.read_some(one);
  reader.cancel();
  move_and_free(owned, into);
}

TYPED_TEST(move_under_operation, bytes_a_cancelled_read_took_are_read_from_the_stream_it_was_moved_to) {
  run_on_loop(TestFixture::backend, []() -> corio::task<void> {
    auto [client, server] = co_await connected_pair();
    auto [wake_client, wake_server] = co_await connected_pair();
    auto owned = std::make_unique<tcp_stream>(std::move(server));
    tcp_stream moved;
    auto reader = corio::spawn(read_once(*owned));
    auto mover = corio::spawn(move_on_wake(wake_server, reader, owned, moved));
    co_await corio::sleep_for(20ms);  // both reads are parked, waiting for input
    EXPECT_EQ(::send(wake_client.native_handle(), "w", 1, MSG_NOSIGNAL), 1);
    EXPECT_EQ(::send(client.native_handle(), "data", 4, MSG_NOSIGNAL), 4);
    co_await corio::with_timeout(5s, std::move(mover));
    std::error_code error = co_await corio::with_timeout(5s, std::move(reader));
    EXPECT_EQ(error, std::errc::operation_canceled) << error.message();
    std::byte buffer[8];
    std::size_t got = co_await corio::with_timeout(5s, moved.read_some(buffer));
    EXPECT_EQ(text(std::span(buffer, got)), "data");
  });
}

TYPED_TEST(move_under_operation, a_datagram_a_cancelled_receive_took_is_received_from_the_socket_it_was_moved_to) {
  run_on_loop(TestFixture::backend, []() -> corio::task<void> {
    auto [wake_client, wake_server] = co_await connected_pair();
    auto owned = std::make_unique<udp_socket>(udp_socket::bind(endpoint::loopback_v4(0)));
    const endpoint to = owned->local_endpoint();
    udp_socket moved;
    auto receiver = corio::spawn(receive_once(*owned));
    auto mover = corio::spawn(move_on_wake(wake_server, receiver, owned, moved));
    co_await corio::sleep_for(20ms);  // both operations are parked, waiting for input
    int sender = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    EXPECT_EQ(::send(wake_client.native_handle(), "w", 1, MSG_NOSIGNAL), 1);
    EXPECT_EQ(::sendto(sender, "datagram", 8, 0, to.data(), to.size()), 8);
    ::close(sender);
    co_await corio::with_timeout(5s, std::move(mover));
    std::error_code error = co_await corio::with_timeout(5s, std::move(receiver));
    EXPECT_EQ(error, std::errc::operation_canceled) << error.message();
    std::byte buffer[16];
    corio::net::datagram got = co_await corio::with_timeout(5s, moved.recv_from(buffer));
    EXPECT_EQ(text(std::span(buffer, got.size)), "datagram");
  });
}

TYPED_TEST(move_under_operation, an_accept_waiting_on_a_moved_listener_gets_the_next_connection) {
  run_on_loop(TestFixture::backend, []() -> corio::task<void> {
    auto owned = std::make_unique<tcp_listener>(tcp_listener::bind(endpoint::loopback_v4(0)));
    const endpoint at = owned->local_endpoint();
    auto acceptor = corio::spawn([](tcp_listener& listener) -> corio::task<tcp_stream> {
      co_return co_await listener.accept();
    }(*owned));
    co_await corio::sleep_for(20ms);  // the accept is parked
    tcp_listener moved;
    move_and_free(owned, moved);
    tcp_stream first_client = co_await tcp_stream::connect(at);
    tcp_stream first = co_await corio::with_timeout(5s, std::move(acceptor));
    EXPECT_EQ(co_await corio::with_timeout(5s, round_trip_from(first_client, first, "one")), "one");
    tcp_stream second_client = co_await tcp_stream::connect(at);
    tcp_stream second = co_await corio::with_timeout(5s, moved.accept());
    EXPECT_EQ(co_await corio::with_timeout(5s, round_trip_from(second_client, second, "two")), "two");
  });
}

// read_exact's reading runs in a task that starts when awaited. What it reads through is taken when it is made, so
// the stream may move (and its old object be freed) in between. Before, the task read the object when
// it started: a stream moved meanwhile was read through its freed object (ASan: heap-use-after-free,
// a randomized stress run whose reader's stream moved into a growing vector).
TYPED_TEST(move_under_operation, a_read_exact_made_before_its_stream_moves_reads_from_it_after) {
  run_on_loop(TestFixture::backend, []() -> corio::task<void> {
    auto [client, server] = co_await connected_pair();
    auto owned = std::make_unique<tcp_stream>(std::move(server));
    std::string got(5, '\0');
    auto reading = owned->read_exact(std::as_writable_bytes(std::span(got)));
    tcp_stream moved;
    move_and_free(owned, moved);
    co_await client.write_all(bytes("hello"));
    EXPECT_EQ(co_await corio::with_timeout(5s, std::move(reading)), 5u);
    EXPECT_EQ(got, "hello");
    EXPECT_EQ(co_await corio::with_timeout(5s, round_trip_from(client, moved, "after")), "after");
  });
}

}  // namespace
