#include "check.hpp"

#include <cstdio>
#include <cstdlib>

namespace lab {

void fail(std::string_view why) {
  std::fprintf(stderr, "self-check failed: %.*s\n", static_cast<int>(why.size()), why.data());
  std::exit(1);
}

}  // namespace lab
