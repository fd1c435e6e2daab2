// corio::net::resolve: numeric hosts (bracketed IPv6 too) without a lookup, names through the blocking
// pool, failures as errors, and the misuse of a name lookup on an event loop.
#include <corio/net/resolve.hpp>
#include <corio/runtime.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <system_error>
#include <vector>

#include "support/net.hpp"

namespace {

using corio::net::endpoint;

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

// A bracketed IPv6 literal is an address like the bare one, so it needs no lookup; unbalanced brackets
// make it a name, which an event loop cannot look up.
TEST(resolve, a_bracketed_ipv6_address_needs_no_lookup) {
  corio::test::run_on_loop(corio::io_backend::automatic, []() -> corio::task<void> {
    auto found = co_await corio::net::resolve("[::1]", 80);
    EXPECT_EQ(found, std::vector<endpoint>{endpoint::loopback_v6(80)});
    EXPECT_THROW(co_await corio::net::resolve("[::1", 80), std::logic_error);
  });
}

// The error is examined on the worker, inside the task that awaited the lookup: the exception object
// then never crosses threads (block_on would rethrow on the caller's thread the object the finished
// task's root still references, released by the worker through libstdc++'s uninstrumented refcount).
corio::task<std::error_code> failed_lookup_error() {
  try {
    co_await corio::net::resolve("no-such-host.invalid", 1);
  } catch (const std::system_error& e) {
    co_return e.code();
  }
  co_return std::error_code();
}

TEST(resolve, a_failed_lookup_carries_the_resolver_category) {
  corio::runtime rt(corio::test::runtime_options(corio::io_backend::automatic));
  std::error_code error = rt.block_on(failed_lookup_error());
  ASSERT_TRUE(error) << "a lookup of an invalid name succeeded";
  EXPECT_EQ(&error.category(), &corio::net::resolve_category()) << error.message();
  EXPECT_FALSE(error.message().empty());
}

}  // namespace
