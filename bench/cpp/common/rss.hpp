#pragma once
// Resident memory of this process, from /proc/self/statm.

#include <cstdint>

namespace lab {

/// Anonymous resident bytes: (resident - shared) pages of /proc/self/statm times the page size.
/// File-backed pages (code faulted in on first use) are left out. Fails the run if unreadable.
std::int64_t anonymous_resident_bytes();

}  // namespace lab
