// spawn_bench: one corio cell of the `spawn` scenario (bench/scenarios.md). Prints one CSV row:
//   impl,threads,case,ops,seconds,ops_per_sec
// Usage: spawn_bench --case spawn_join|ping_pong|fanout --threads T --ops N [--work W]
//
// Builds a corio::runtime with T workers, runs the case body with block_on (which spawns it onto a
// worker, as the tokio and Go peers spawn theirs), and checks the body's outcome on the main thread.

#include <corio/join_handle.hpp>
#include <corio/runtime.hpp>
#include <corio/task.hpp>

#include <cinttypes>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>

#include "../common/check.hpp"
#include "../common/cli.hpp"
#include "cases.hpp"

namespace {

struct run_case {
  std::string_view name;
  std::uint64_t ops;
  std::uint64_t rounds;
};

/// The case body; block_on spawns it onto the runtime, so it runs on a worker.
corio::task<lab::outcome> body(run_case which) {
  if (which.name == "spawn_join") return lab::spawn_join(which.ops);
  if (which.name == "ping_pong") return lab::ping_pong(which.ops);
  return lab::fanout(which.ops, which.rounds);  // main has checked the name
}

}  // namespace

int main(int argc, char** argv) {
  lab::cli args(argc, argv, {"case", "threads", "ops", "work"}, {});
  const std::string name = args.text("case");
  const std::uint64_t threads = args.number("threads", 0);
  const std::uint64_t ops = args.number("ops", 0);
  const std::uint64_t rounds = args.number("work", lab::work_rounds);
  lab::expect(threads > 0 && ops > 0 && rounds > 0, "--threads, --ops and --work must be positive");
  lab::expect(name == "spawn_join" || name == "ping_pong" || name == "fanout", "unknown --case " + name);

  lab::outcome result;
  {
    corio::runtime::options options;
    options.workers = static_cast<std::size_t>(threads);
    corio::runtime rt(std::move(options));
    result = rt.block_on(body(run_case{name, ops, rounds}));
  }
  lab::expect(result.error.empty(), result.error);
  lab::expect(std::isfinite(result.seconds) && result.seconds > 0, "elapsed time is not finite and positive");
  std::printf("corio,%" PRIu64 ",%s,%" PRIu64 ",%.6f,%.0f\n", threads, name.c_str(), ops, result.seconds,
              static_cast<double>(ops) / result.seconds);
  return 0;
}
