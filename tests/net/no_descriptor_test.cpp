// Operations on a socket object that holds no descriptor (default-constructed, closed, moved from)
// fail with EBADF on every read path, as the system call would, instead of touching per-socket state
// indexed by the descriptor number (io_uring's file table: a crash at -1, found by a user trial).
#include <corio/join_handle.hpp>
#include <corio/net/tcp_listener.hpp>
#include <corio/net/tcp_stream.hpp>
#include <corio/net/udp_socket.hpp>

#include <gtest/gtest.h>

#include <cerrno>
#include <system_error>
#include <utility>

#include "support/net.hpp"

namespace {

using corio::net::endpoint;
using corio::net::tcp_listener;
using corio::net::tcp_stream;
using namespace corio::test;

template <class Backend>
class no_descriptor : public backend_test<Backend> {};
TYPED_TEST_SUITE(no_descriptor, every_read_path, backend_names);

const std::error_code bad_descriptor(EBADF, std::system_category());

TYPED_TEST(no_descriptor, reads_and_writes_on_an_empty_closed_or_moved_from_stream_fail_with_ebadf) {
  run_on_loop(TestFixture::backend, []() -> corio::task<void> {
    tcp_stream empty;
    EXPECT_EQ(co_await read_once(empty), bad_descriptor);
    EXPECT_EQ(co_await write_everything(empty, bytes("x")), bad_descriptor);
    auto [client, server] = co_await connected_pair();
    co_await client.write_all(bytes("x"));
    EXPECT_FALSE(co_await read_once(server)) << "the stream's state exists before it is closed";
    server.close();
    EXPECT_EQ(co_await read_once(server), bad_descriptor);
    EXPECT_EQ(co_await write_everything(server, bytes("x")), bad_descriptor);
    tcp_stream taker = std::move(client);
    EXPECT_EQ(co_await read_once(client), bad_descriptor);
  });
}

TYPED_TEST(no_descriptor, accepts_on_an_empty_or_closed_listener_fail_with_ebadf) {
  run_on_loop(TestFixture::backend, []() -> corio::task<void> {
    tcp_listener empty;
    EXPECT_EQ(co_await accept_once(empty), bad_descriptor);
    auto listener = tcp_listener::bind(endpoint::loopback_v4(0));
    listener.close();
    EXPECT_EQ(co_await accept_once(listener), bad_descriptor);
  });
}

TYPED_TEST(no_descriptor, the_throwing_form_names_the_operation) {
  run_on_loop(TestFixture::backend, []() -> corio::task<void> {
    tcp_stream empty;
    std::byte buffer[16];
    try {
      co_await empty.read_some(buffer);
      ADD_FAILURE() << "read_some on an empty stream did not throw";
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code(), bad_descriptor);
      EXPECT_NE(std::string(e.what()).find("read_some"), std::string::npos) << e.what();
    }
  });
}

}  // namespace
