// corio::io_backend: names, and current_io_backend() before and after a thread's first I/O.
#include <corio/event_loop.hpp>
#include <corio/io_backend.hpp>
#include <corio/net/tcp_listener.hpp>
#include <corio/net/tcp_stream.hpp>

#include <gtest/gtest.h>

#include "support/net.hpp"

namespace {

using corio::io_backend;
using namespace corio::test;

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

}  // namespace
