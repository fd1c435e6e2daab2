#pragma once
// Self-check helpers: a failed check prints why and exits 1, so the run prints no row.

#include <string_view>

namespace lab {

/// Prints `why` to stderr and exits with status 1.
[[noreturn]] void fail(std::string_view why);

/// Fails with `why` unless `ok`.
inline void expect(bool ok, std::string_view why) {
  if (!ok) fail(why);
}

}  // namespace lab
