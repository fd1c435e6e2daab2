// post_bench: one cell of the `post` scenario (bench/scenarios.md). Prints one CSV row:
//   impl,producers,tasks,seconds,tasks_per_sec
// Usage: post_bench --impl NAME --producers P [--tasks-per-producer N] [--quick]
// Without --tasks-per-producer, N is 1,000,000 (100,000 with --quick).

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "../common/check.hpp"
#include "../common/cli.hpp"
#include "boost_lockfree.hpp"
#include "consumers.hpp"
#include "corio_queue.hpp"
#include "harness.hpp"
#include "moodycamel_queue.hpp"
#include "mutex_vector.hpp"

namespace {

struct implementation {
  std::string_view name;
  double (*run)(std::uint32_t producers, std::uint32_t per_producer);
};

// Each peer twice: its consumer busy-polling, and sleeping on an eventfd as evpp's loop does (`-wake`).
constexpr implementation implementations[] = {
    {"mutex-vector", &lab::run_post_cell<lab::busy_polling<lab::mutex_vector_store>>},
    {"mutex-vector-wake", &lab::run_post_cell<lab::evpp_wake<lab::mutex_vector_store>>},
    {"boost-lockfree", &lab::run_post_cell<lab::busy_polling<lab::boost_lockfree_store>>},
    {"boost-lockfree-wake", &lab::run_post_cell<lab::evpp_wake<lab::boost_lockfree_store>>},
    {"moodycamel", &lab::run_post_cell<lab::busy_polling<lab::moodycamel_store<false>>>},
    {"moodycamel-wake", &lab::run_post_cell<lab::evpp_wake<lab::moodycamel_store<false>>>},
    {"moodycamel-bulk", &lab::run_post_cell<lab::busy_polling<lab::moodycamel_store<true>>>},
    {"moodycamel-bulk-wake", &lab::run_post_cell<lab::evpp_wake<lab::moodycamel_store<true>>>},
    {"corio", &lab::run_post_cell<lab::corio_queue>},
};

const implementation& find(std::string_view name) {
  for (const auto& impl : implementations)
    if (impl.name == name) return impl;
  lab::fail("unknown --impl " + std::string(name));
}

}  // namespace

int main(int argc, char** argv) {
  lab::cli args(argc, argv, {"impl", "producers", "tasks-per-producer"}, {"quick"});
  const implementation& impl = find(args.text("impl"));
  const auto producers = static_cast<std::uint32_t>(args.number("producers", 0));
  const auto per_producer =
      static_cast<std::uint32_t>(args.number("tasks-per-producer", args.flag("quick") ? 100'000 : 1'000'000));
  lab::expect(producers > 0 && per_producer > 0, "--producers and --tasks-per-producer must be positive");
  const double seconds = impl.run(producers, per_producer);
  lab::expect(seconds > 0, "elapsed time is not positive");
  const std::uint64_t tasks = std::uint64_t{producers} * per_producer;
  std::printf("%.*s,%" PRIu32 ",%" PRIu64 ",%.6f,%.0f\n", static_cast<int>(impl.name.size()), impl.name.data(),
              producers, tasks, seconds, static_cast<double>(tasks) / seconds);
  return 0;
}
