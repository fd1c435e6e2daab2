#pragma once
// corio::net::endpoint: an IPv4 or IPv6 address and a port.
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace corio::net {

/// An IPv4 or IPv6 socket address (address and port), parsed from and formatted to text. A value
/// type: copy it freely. Not thread-safe to mutate, like any value.
///
///     auto ep = corio::net::endpoint::parse("[::1]:8080");        // std::optional<endpoint>
///     auto any = corio::net::endpoint::any_v4(0);                  // 0.0.0.0:0, an ephemeral port
///     std::string text = ep->to_string();                          // "[::1]:8080"
class endpoint {
 public:
  /// 0.0.0.0:0.
  endpoint() noexcept;

  /// Parses "1.2.3.4:80", "[::1]:80" (IPv6 in brackets, as in URLs) or "[fe80::1%eth0]:80". Numeric
  /// addresses only (names go through corio::net::resolve). Returns nothing on malformed text, which
  /// includes a '%' with no scope id after it and any NUL character.
  static std::optional<endpoint> parse(std::string_view text);
  /// Parses a numeric address without a port ("127.0.0.1", "::1", or "[::1]": one pair of brackets
  /// around an IPv6 address is accepted and stripped) and pairs it with `port`.
  static std::optional<endpoint> parse(std::string_view address, std::uint16_t port);

  static endpoint loopback_v4(std::uint16_t port) noexcept;
  static endpoint loopback_v6(std::uint16_t port) noexcept;
  static endpoint any_v4(std::uint16_t port) noexcept;
  static endpoint any_v6(std::uint16_t port) noexcept;

  /// From a kernel socket address (AF_INET or AF_INET6); nothing for other families.
  static std::optional<endpoint> from_sockaddr(const sockaddr* address, socklen_t length) noexcept;

  bool is_v4() const noexcept { return storage_.ss_family == AF_INET; }
  bool is_v6() const noexcept { return storage_.ss_family == AF_INET6; }
  int family() const noexcept { return storage_.ss_family; }
  std::uint16_t port() const noexcept;
  void set_port(std::uint16_t port) noexcept;

  /// "1.2.3.4:80" or "[::1]:80".
  std::string to_string() const;
  /// Just the address: "1.2.3.4" or "::1".
  std::string address_string() const;

  const sockaddr* data() const noexcept { return reinterpret_cast<const sockaddr*>(&storage_); }
  socklen_t size() const noexcept { return is_v6() ? sizeof(sockaddr_in6) : sizeof(sockaddr_in); }

  friend bool operator==(const endpoint& a, const endpoint& b) noexcept;

 private:
  sockaddr_storage storage_;
};

}  // namespace corio::net
