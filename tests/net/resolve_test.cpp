// corio::net::resolve: numeric hosts (bracketed IPv6 too) without a lookup, names through the blocking
// pool of a runtime or an event loop, failures as errors (a NUL in the host, a hint for "host:port"),
// and the misuse of a name lookup on a plain thread.
#include <corio/net/error.hpp>
#include <corio/net/resolve.hpp>
#include <corio/runtime.hpp>
#include <corio/sync_wait.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>
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

// An event loop looks a name up on its own blocking pool, as a runtime does.
TEST(resolve, a_name_on_an_event_loop_is_looked_up_on_the_loop_s_blocking_pool) {
  corio::test::run_on_loop(corio::io_backend::automatic, []() -> corio::task<void> {
    EXPECT_EQ((co_await corio::net::resolve("127.0.0.1", 1)).size(), 1u);
    auto local = co_await corio::net::resolve("localhost", 8080);
    EXPECT_FALSE(local.empty());
    EXPECT_TRUE(std::all_of(local.begin(), local.end(), [](const endpoint& e) { return e.port() == 8080; }));
    std::error_code unknown;
    try {
      co_await corio::net::resolve("no-such-host.invalid", 1);
    } catch (const std::system_error& error) {
      unknown = error.code();
    }
    EXPECT_TRUE(unknown) << "an unknown name resolved";
  });
}

// Under sync_wait on a plain thread there is no blocking pool: a numeric host still parses, a name is
// a misuse with a message saying what it needs.
TEST(resolve, a_name_on_a_plain_thread_is_a_logic_error) {
  EXPECT_EQ(corio::sync_wait(corio::net::resolve("127.0.0.1", 1)).size(), 1u);
  try {
    corio::sync_wait(corio::net::resolve("localhost", 1));
    ADD_FAILURE() << "a name resolved on a plain thread";
  } catch (const std::logic_error& error) {
    EXPECT_NE(std::string(error.what()).find("event loop"), std::string::npos) << error.what();
  }
}

// A bracketed IPv6 literal is an address like the bare one, so it needs no lookup; unbalanced brackets
// make it a name, which a plain thread cannot look up.
TEST(resolve, a_bracketed_ipv6_address_needs_no_lookup) {
  auto found = corio::sync_wait(corio::net::resolve("[::1]", 80));
  EXPECT_EQ(found, std::vector<endpoint>{endpoint::loopback_v6(80)});
  EXPECT_THROW(corio::sync_wait(corio::net::resolve("[::1", 80)), std::logic_error);
}

// The error is examined on the worker, inside the task that awaited the lookup: the exception object
// then never crosses threads (block_on would rethrow on the caller's thread the object the finished
// task's root still references, released by the worker through libstdc++'s uninstrumented refcount).
struct failure {
  std::error_code code;  // empty if the lookup succeeded
  std::string message;
};

corio::task<failure> resolve_failure(std::string host, std::uint16_t port) {
  try {
    co_await corio::net::resolve(std::move(host), port);
  } catch (const std::system_error& e) {
    co_return failure{e.code(), e.what()};
  }
  co_return failure{};
}

TEST(resolve, a_failed_lookup_carries_the_resolver_category) {
  corio::runtime rt(corio::test::runtime_options(corio::io_backend::automatic));
  std::error_code error = rt.block_on(resolve_failure("no-such-host.invalid", 1)).code;
  ASSERT_TRUE(error) << "a lookup of an invalid name succeeded";
  EXPECT_EQ(&error.category(), &corio::net::resolve_category()) << error.message();
  EXPECT_FALSE(error.message().empty());
}

TEST(resolve, an_empty_host_says_so) {
  corio::runtime rt(corio::test::runtime_options(corio::io_backend::automatic));
  failure empty = rt.block_on(resolve_failure("", 1));
  ASSERT_TRUE(empty.code) << "a lookup of an empty name succeeded";
  EXPECT_NE(empty.message.find("corio::net::resolve of an empty host name"), std::string::npos) << empty.message;
}

// getaddrinfo and inet_pton read the host as a C string: they would stop at the NUL and answer for the
// part before it. The host is checked before anything else, so an event loop gets this error too (not
// the logic_error of a name lookup).
TEST(resolve, a_host_holding_a_nul_character_is_rejected) {
  corio::test::run_on_loop(corio::io_backend::automatic, []() -> corio::task<void> {
    const std::string hosts[] = {std::string("127.0.0.1\0junk", 14), std::string("localhost\0junk", 14)};
    for (const std::string& host : hosts) {
      failure found = co_await resolve_failure(host, 80);
      EXPECT_EQ(&found.code.category(), &corio::net::resolve_category()) << found.message;
      EXPECT_NE(found.message.find("NUL"), std::string::npos) << found.message;
    }
  });
}

// The numeric forms glibc's getaddrinfo would read (octal, hexadecimal, fewer than four parts, a bare
// number) are refused, as endpoint::parse refuses them, not looked up as some other address. The
// check comes before the lookup, so an event loop gets this error too.
TEST(resolve, legacy_numeric_forms_are_refused_not_read_as_another_address) {
  corio::test::run_on_loop(corio::io_backend::automatic, []() -> corio::task<void> {
    for (const char* host : {"010.0.0.1", "127.1", "0x7f.1", "80", "0177.0.0.1"}) {
      EXPECT_FALSE(endpoint::parse(host, 80).has_value()) << host;
      failure found = co_await resolve_failure(host, 80);
      EXPECT_EQ(&found.code.category(), &corio::net::resolve_category()) << host << ": " << found.message;
      EXPECT_NE(found.message.find("dotted-decimal"), std::string::npos) << found.message;
    }
    EXPECT_EQ((co_await corio::net::resolve("10.0.0.1", 80)).front(), *endpoint::parse("10.0.0.1", 80));
  });
}

// resolve("localhost:8080", 8080) is a lookup of a name with a colon in it, which fails; the message
// says where the port goes. A plain failed name gets no such hint.
TEST(resolve, a_failed_host_with_a_port_says_the_port_is_a_separate_argument) {
  corio::runtime rt(corio::test::runtime_options(corio::io_backend::automatic));
  for (const char* host : {"localhost:8080", "127.0.0.1:8080", "[::1]:8080"}) {
    failure found = rt.block_on(resolve_failure(host, 8080));
    ASSERT_TRUE(found.code) << host << " resolved";
    EXPECT_NE(found.message.find("the port is a separate argument"), std::string::npos) << found.message;
  }
  failure plain = rt.block_on(resolve_failure("no-such-host.invalid", 1));
  ASSERT_TRUE(plain.code);
  EXPECT_EQ(plain.message.find("the port is a separate argument"), std::string::npos) << plain.message;
}

}  // namespace
