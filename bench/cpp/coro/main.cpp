// coro_bench: one cell of the `coro` scenario (bench/scenarios.md). Prints one CSV row:
//   impl,coroutines,switches,create_ns,switch_ns,bytes_per_coroutine
// Usage: coro_bench --impl NAME --coroutines N --switches-each S [--quick]

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>

#include "../common/check.hpp"
#include "../common/cli.hpp"
#include "boost_fiber.hpp"
#include "corio_pool.hpp"
#include "cxx20_bare.hpp"
#include "harness.hpp"
#include "ucontext_pool.hpp"

namespace {

using lab::coro_cell;
using lab::coro_result;

struct implementation {
  std::string_view name;
  coro_result (*measure)(const coro_cell&);
};

constexpr implementation implementations[] = {
    {"cxx20-bare", &lab::measure<lab::cxx20_bare_pool>},
    {"corio", &lab::measure<lab::corio_pool>},
    {"boost-context", &lab::measure<lab::boost_fiber_pool>},
    {"ucontext", &lab::measure<lab::ucontext_pool>},
};

const implementation& find(std::string_view name) {
  for (const auto& impl : implementations)
    if (impl.name == name) return impl;
  lab::fail("unknown --impl " + std::string(name));
}

coro_cell cell_from(const lab::cli& args) {
  coro_cell cell;
  cell.coroutines = args.number("coroutines", 0);
  cell.switches_each = args.number("switches-each", 0);
  lab::expect(cell.coroutines > 0 && cell.switches_each > 0, "--coroutines and --switches-each are required");
  const bool quick = args.flag("quick");
  const std::size_t min_batches = quick ? 3 : 7;
  const std::size_t min_created = quick ? 2'000 : 20'000;
  cell.memory_batch = std::max<std::size_t>(cell.coroutines, 1'000);
  cell.create_batches = std::max(min_batches, (min_created + cell.coroutines - 1) / cell.coroutines);
  return cell;
}

}  // namespace

int main(int argc, char** argv) {
  lab::cli args(argc, argv, {"impl", "coroutines", "switches-each"}, {"quick"});
  const implementation& impl = find(args.text("impl"));
  const coro_cell cell = cell_from(args);
  const coro_result result = impl.measure(cell);
  for (double value : {result.create_ns, result.switch_ns, result.bytes_per_coroutine})
    lab::expect(std::isfinite(value) && value >= 0, "a measured value is negative or not finite");
  std::printf("%.*s,%zu,%" PRIu64 ",%.2f,%.3f,%.0f\n", static_cast<int>(impl.name.size()), impl.name.data(),
              cell.coroutines, cell.coroutines * cell.switches_each, result.create_ns, result.switch_ns,
              result.bytes_per_coroutine);
  return 0;
}
