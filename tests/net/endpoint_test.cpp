// corio::net::endpoint parsing and formatting.
#include <corio/net/endpoint.hpp>

#include <gtest/gtest.h>

#include <string>
#include <string_view>

namespace {

using namespace std::string_view_literals;

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

// A '%' promises a scope id (an interface name or number); with nothing after it the text is cut
// short, not an address without a scope.
TEST(endpoint, an_empty_scope_id_is_malformed) {
  auto scoped = endpoint::parse("[fe80::1%1]:80");
  ASSERT_TRUE(scoped);
  EXPECT_NE(scoped->to_string().find('%'), std::string::npos) << scoped->to_string();
  for (const char* bad : {"[fe80::1%]:80", "[::1%]:80", "127.0.0.1%:80"}) {
    EXPECT_FALSE(endpoint::parse(bad)) << bad;
  }
  EXPECT_FALSE(endpoint::parse("fe80::1%", 80));
  EXPECT_FALSE(endpoint::parse("[fe80::1%]", 80));
}

// A scope id is 32 bits (sin6_scope_id): one above 65535 parses and round-trips through to_string (it
// was capped at 65535, like a port, so such an endpoint's own text did not parse back); one past 32
// bits does not parse.
TEST(endpoint, a_numeric_scope_id_spans_32_bits_and_round_trips) {
  for (const char* text : {"[fe80::1%65536]:80", "[fe80::1%4294967295]:80"}) {
    auto scoped = endpoint::parse(text);
    ASSERT_TRUE(scoped) << text;
    EXPECT_EQ(scoped->to_string(), text);
    auto again = endpoint::parse(scoped->to_string());
    ASSERT_TRUE(again) << scoped->to_string();
    EXPECT_EQ(*again, *scoped);
  }
  EXPECT_FALSE(endpoint::parse("[fe80::1%4294967296]:80"));
}

// The address and scope go to C functions that would stop at a NUL and accept what comes before it.
TEST(endpoint, text_holding_a_nul_character_is_malformed) {
  EXPECT_FALSE(endpoint::parse("127.0.0.1\0junk:80"sv));
  EXPECT_FALSE(endpoint::parse("[::1\0junk]:80"sv));
  EXPECT_FALSE(endpoint::parse("[fe80::1%lo\0junk]:80"sv));
  EXPECT_FALSE(endpoint::parse("127.0.0.1\0"sv, 80));
}

TEST(endpoint, an_address_alone_may_carry_one_pair_of_brackets_around_ipv6) {
  auto v6 = endpoint::parse("[::1]", 9);
  ASSERT_TRUE(v6);
  EXPECT_EQ(*v6, endpoint::loopback_v6(9));
  EXPECT_EQ(endpoint::parse("[2001:db8::1]", 53)->to_string(), "[2001:db8::1]:53");
  for (const char* bad : {"[::1", "::1]", "[[::1]]", "[]", "[127.0.0.1]", "[::1]:9"}) {
    EXPECT_FALSE(endpoint::parse(bad, 9)) << bad;
  }
}

}  // namespace
