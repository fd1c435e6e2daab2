#pragma once
// Resident memory of this process, from /proc/self/statm.

#include <cstdint>

namespace lab {

/// Resident bytes (second field of /proc/self/statm times the page size). Fails the run if unreadable.
std::int64_t resident_bytes();

}  // namespace lab
