#include "rss.hpp"

#include <unistd.h>

#include <cstdio>

#include "check.hpp"

namespace lab {

std::int64_t anonymous_resident_bytes() {
  std::FILE* file = std::fopen("/proc/self/statm", "r");
  expect(file != nullptr, "cannot open /proc/self/statm");
  long long total = 0;
  long long resident = 0;
  long long shared = 0;
  int fields = std::fscanf(file, "%lld %lld %lld", &total, &resident, &shared);
  std::fclose(file);
  expect(fields == 3, "cannot parse /proc/self/statm");
  return static_cast<std::int64_t>(resident - shared) * sysconf(_SC_PAGESIZE);
}

}  // namespace lab
