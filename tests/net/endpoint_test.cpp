// corio::net::endpoint parsing and formatting, and resolve.
#include <corio/net/endpoint.hpp>
#include <corio/net/resolve.hpp>
#include <corio/runtime.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>

#include "support/net.hpp"

namespace {

using corio::net::endpoint;

TEST(endpoint, parses_and_formats_ipv4_and_ipv6) {
  auto v4 = endpoint::parse("127.0.0.1:8080");
  ASSERT_TRUE(v4);
  EXPECT_TRUE(v4->is_v4());
  EXPECT_EQ(v4->port(), 8080);
  EXPECT_EQ(v4->to_string(), "127.0.0.1:8080");
  EXPECT_EQ(*v4, endpoint::loopback_v4(8080));

  auto v6 = endpoint::parse("[::1]:443");
  ASSERT_TRUE(v6);
  EXPECT_TRUE(v6->is_v6());
  EXPECT_EQ(v6->port(), 443);
  EXPECT_EQ(v6->to_string(), "[::1]:443");
  EXPECT_EQ(*v6, endpoint::loopback_v6(443));
  EXPECT_EQ(endpoint::parse("2001:db8::1", 53)->to_string(), "[2001:db8::1]:53");
  EXPECT_EQ(endpoint::any_v4(0).to_string(), "0.0.0.0:0");
  EXPECT_EQ(endpoint::any_v6(9).to_string(), "[::]:9");
}

TEST(endpoint, rejects_malformed_text) {
  for (const char* bad : {"", "127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:8x", "::1:80", "[::1]80",
                          "[127.0.0.1]:80", "300.1.1.1:80", "host:80", "[::1]:-1"}) {
    EXPECT_FALSE(endpoint::parse(bad)) << bad;
  }
}

TEST(resolve, numeric_hosts_need_no_lookup_and_names_go_through_the_blocking_pool) {
  corio::runtime rt(corio::test::runtime_options(corio::io_backend::automatic));
  auto numeric = rt.block_on(corio::net::resolve("::1", 80));
  ASSERT_EQ(numeric.size(), 1u);
  EXPECT_EQ(numeric[0], endpoint::loopback_v6(80));
  auto local = rt.block_on(corio::net::resolve("localhost", 8080));
  ASSERT_FALSE(local.empty());
  EXPECT_TRUE(std::all_of(local.begin(), local.end(), [](const endpoint& e) { return e.port() == 8080; }));
  EXPECT_THROW(rt.block_on(corio::net::resolve("no-such-host.invalid", 1)), std::system_error);
}

TEST(resolve, a_name_on_an_event_loop_is_a_logic_error) {
  corio::test::run_on_loop(corio::io_backend::automatic, []() -> corio::task<void> {
    EXPECT_EQ((co_await corio::net::resolve("127.0.0.1", 1)).size(), 1u);
    EXPECT_THROW(co_await corio::net::resolve("localhost", 1), std::logic_error);
  });
}

}  // namespace
