// corio::net::endpoint: parsing and formatting with inet_pton/inet_ntop.
#include <corio/net/endpoint.hpp>

#include <arpa/inet.h>
#include <net/if.h>

#include <charconv>
#include <cstdint>
#include <cstring>

namespace corio::net {
namespace {

// The whole of `text` as a decimal number no greater than `max`.
std::optional<std::uint32_t> parse_number(std::string_view text, std::uint32_t max) {
  std::uint32_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || value > max) {
    return std::nullopt;
  }
  return value;
}

std::optional<std::uint16_t> parse_port(std::string_view text) {
  auto value = parse_number(text, 65535);
  if (!value) {
    return std::nullopt;
  }
  return static_cast<std::uint16_t>(*value);
}

// "[::1]" -> "::1", as in URLs; an address without brackets as it is. Nothing for unbalanced brackets
// or brackets around anything but an IPv6 address.
std::optional<std::string_view> strip_brackets(std::string_view address) {
  bool opens = address.starts_with('[');
  if (opens != address.ends_with(']')) {
    return std::nullopt;
  }
  if (!opens) {
    return address;
  }
  address = address.substr(1, address.size() - 2);
  if (address.find(':') == std::string_view::npos) {
    return std::nullopt;  // brackets are for IPv6 only
  }
  return address;
}

}  // namespace

endpoint::endpoint() noexcept : storage_{} {
  auto& v4 = reinterpret_cast<sockaddr_in&>(storage_);
  v4.sin_family = AF_INET;
}

std::optional<endpoint> endpoint::parse(std::string_view address, std::uint16_t port) {
  if (address.find('\0') != std::string_view::npos) {
    return std::nullopt;  // inet_pton and if_nametoindex would stop at it and accept what comes before
  }
  auto bare = strip_brackets(address);
  if (!bare) {
    return std::nullopt;
  }
  endpoint result;
  std::string text(*bare);
  std::string scope;
  if (auto percent = text.find('%'); percent != std::string::npos) {
    scope = text.substr(percent + 1);
    text.resize(percent);
    if (scope.empty()) {
      return std::nullopt;  // a '%' promises a scope id: without one the text is cut short
    }
  }
  auto& v4 = reinterpret_cast<sockaddr_in&>(result.storage_);
  auto& v6 = reinterpret_cast<sockaddr_in6&>(result.storage_);
  if (scope.empty() && ::inet_pton(AF_INET, text.c_str(), &v4.sin_addr) == 1) {
    v4.sin_family = AF_INET;
  } else if (::inet_pton(AF_INET6, text.c_str(), &v6.sin6_addr) == 1) {
    result.storage_ = {};
    ::inet_pton(AF_INET6, text.c_str(), &v6.sin6_addr);
    v6.sin6_family = AF_INET6;
    if (!scope.empty()) {
      unsigned index = ::if_nametoindex(scope.c_str());
      if (index == 0) {
        auto number = parse_number(scope, UINT32_MAX);  // a numeric scope id (sin6_scope_id is 32 bits)
        if (!number) {
          return std::nullopt;
        }
        index = *number;
      }
      v6.sin6_scope_id = index;
    }
  } else {
    return std::nullopt;
  }
  result.set_port(port);
  return result;
}

std::optional<endpoint> endpoint::parse(std::string_view text) {
  std::string_view address;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return std::nullopt;
    }
    address = text.substr(0, close + 1);  // the brackets stay: parse(address, port) checks and strips them
    port = text.substr(close + 2);
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string_view::npos || text.find(':') != colon) {
      return std::nullopt;  // no port, or an unbracketed IPv6 address
    }
    address = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  auto number = parse_port(port);
  if (!number) {
    return std::nullopt;
  }
  return parse(address, *number);
}

endpoint endpoint::loopback_v4(std::uint16_t port) noexcept {
  endpoint result;
  reinterpret_cast<sockaddr_in&>(result.storage_).sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  result.set_port(port);
  return result;
}

endpoint endpoint::any_v4(std::uint16_t port) noexcept {
  endpoint result;
  result.set_port(port);
  return result;
}

endpoint endpoint::loopback_v6(std::uint16_t port) noexcept {
  endpoint result = any_v6(port);
  reinterpret_cast<sockaddr_in6&>(result.storage_).sin6_addr = in6addr_loopback;
  return result;
}

endpoint endpoint::any_v6(std::uint16_t port) noexcept {
  endpoint result;
  result.storage_ = {};
  auto& v6 = reinterpret_cast<sockaddr_in6&>(result.storage_);
  v6.sin6_family = AF_INET6;
  v6.sin6_addr = in6addr_any;
  result.set_port(port);
  return result;
}

std::optional<endpoint> endpoint::from_sockaddr(const sockaddr* address, socklen_t length) noexcept {
  if (address == nullptr) {
    return std::nullopt;
  }
  endpoint result;
  if (address->sa_family == AF_INET && length >= static_cast<socklen_t>(sizeof(sockaddr_in))) {
    std::memcpy(&result.storage_, address, sizeof(sockaddr_in));
  } else if (address->sa_family == AF_INET6 && length >= static_cast<socklen_t>(sizeof(sockaddr_in6))) {
    result.storage_ = {};
    std::memcpy(&result.storage_, address, sizeof(sockaddr_in6));
  } else {
    return std::nullopt;
  }
  return result;
}

std::uint16_t endpoint::port() const noexcept {
  return ntohs(is_v6() ? reinterpret_cast<const sockaddr_in6&>(storage_).sin6_port
                       : reinterpret_cast<const sockaddr_in&>(storage_).sin_port);
}

void endpoint::set_port(std::uint16_t port) noexcept {
  if (is_v6()) {
    reinterpret_cast<sockaddr_in6&>(storage_).sin6_port = htons(port);
  } else {
    reinterpret_cast<sockaddr_in&>(storage_).sin_port = htons(port);
  }
}

std::string endpoint::address_string() const {
  char text[INET6_ADDRSTRLEN + IF_NAMESIZE + 2] = {};
  if (is_v6()) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(storage_);
    ::inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof(text));
    std::string result(text);
    if (v6.sin6_scope_id != 0) {
      char name[IF_NAMESIZE] = {};
      result += '%';
      result += ::if_indextoname(v6.sin6_scope_id, name) != nullptr ? std::string(name) : std::to_string(v6.sin6_scope_id);
    }
    return result;
  }
  ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(storage_).sin_addr, text, sizeof(text));
  return text;
}

std::string endpoint::to_string() const {
  // Appended piece by piece: g++ 12 at -O3 reports a false -Wrestrict on chained operator+.
  std::string text;
  if (is_v6()) {
    text.append("[").append(address_string()).append("]");
  } else {
    text.append(address_string());
  }
  return text.append(":").append(std::to_string(port()));
}

bool operator==(const endpoint& a, const endpoint& b) noexcept {
  if (a.family() != b.family()) {
    return false;
  }
  if (a.is_v6()) {
    const auto& x = reinterpret_cast<const sockaddr_in6&>(a.storage_);
    const auto& y = reinterpret_cast<const sockaddr_in6&>(b.storage_);
    return x.sin6_port == y.sin6_port && x.sin6_scope_id == y.sin6_scope_id &&
           std::memcmp(&x.sin6_addr, &y.sin6_addr, sizeof(x.sin6_addr)) == 0;
  }
  const auto& x = reinterpret_cast<const sockaddr_in&>(a.storage_);
  const auto& y = reinterpret_cast<const sockaddr_in&>(b.storage_);
  return x.sin_port == y.sin_port && x.sin_addr.s_addr == y.sin_addr.s_addr;
}

}  // namespace corio::net
