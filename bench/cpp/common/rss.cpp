#include "rss.hpp"

#include <unistd.h>

#include <cstdio>

#include "check.hpp"

namespace lab {

std::int64_t resident_bytes() {
  std::FILE* file = std::fopen("/proc/self/statm", "r");
  expect(file != nullptr, "cannot open /proc/self/statm");
  long long total = 0;
  long long resident = 0;
  int fields = std::fscanf(file, "%lld %lld", &total, &resident);
  std::fclose(file);
  expect(fields == 2, "cannot parse /proc/self/statm");
  return static_cast<std::int64_t>(resident) * sysconf(_SC_PAGESIZE);
}

}  // namespace lab
