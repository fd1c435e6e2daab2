#pragma once
// corio::net::errc: the networking errors that are not an errno.
#include <system_error>
#include <type_traits>

namespace corio::net {

/// Errors of corio's own networking layer (category "corio.net"); errno values use
/// std::system_category, name resolution the "getaddrinfo" category.
enum class errc {
  /// read_exact: the peer closed the stream before the buffer was full.
  end_of_stream = 1,
  /// An accept or read from an event loop or runtime other than the one whose io_uring reactor
  /// serves the socket (its multishot request there, or its registered file, would take the data).
  served_by_another_reactor = 2,
};

const std::error_category& net_category() noexcept;
/// Errors of getaddrinfo (EAI_* values, message from gai_strerror).
const std::error_category& resolve_category() noexcept;

inline std::error_code make_error_code(errc value) noexcept { return {static_cast<int>(value), net_category()}; }

}  // namespace corio::net

template <>
struct std::is_error_code_enum<corio::net::errc> : std::true_type {};
