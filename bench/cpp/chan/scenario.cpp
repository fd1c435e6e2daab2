#include "scenario.hpp"

#include <cinttypes>
#include <cmath>
#include <cstdio>

#include "../common/check.hpp"
#include "../common/cli.hpp"

namespace lab::chan {

namespace {

struct named_type {
  std::string_view name;
  etype type;
};

constexpr named_type etypes[] = {
    {"int", etype::int_value}, {"str", etype::str}, {"str_ptr", etype::str_ptr}, {"str_clone", etype::str_clone}};

}  // namespace

params parse(int argc, char** argv) {
  cli args(argc, argv, {"w", "e", "q", "t", "s", "threads"}, {});
  params p;
  p.workers = args.number("w", 0);
  p.events = args.number("e", 0);
  p.capacity = args.number("q", 256);
  p.string_size = static_cast<std::size_t>(args.number("s", 16));
  p.threads = static_cast<std::size_t>(args.number("threads", 0));
  p.type_name = args.text("t", "int");
  expect(p.workers > 0 && p.events > 0 && p.capacity > 0, "-w, -e and -q must be positive");
  for (const auto& [name, type] : etypes) {
    if (name == p.type_name) {
      p.type = type;
      return p;
    }
  }
  fail("unknown -t " + p.type_name + " (int, str, str_ptr or str_clone)");
}

event_source::event_source(etype type, std::size_t string_size) : type_(type), shared_(string_size, 'x') {}

double per_item(std::int64_t before, std::int64_t after, std::uint64_t count) {
  return static_cast<double>(after - before) / static_cast<double>(count);
}

void report(std::string_view base, const params& p, double seconds, std::uint64_t counted, memory mem) {
  const std::uint64_t expected = p.workers * p.events;
  expect(counted == expected, "counted " + std::to_string(counted) + " events, expected W*E = " +
                                  std::to_string(expected) + " (lost, extra or exit-marker events)");
  expect(std::isfinite(seconds) && seconds > 0, "elapsed time is not finite and positive");
  const std::string program =
      p.threads == 0 ? std::string(base) : std::string(base) + "-" + std::to_string(p.threads) + "t";
  std::printf("%s,%s,%" PRIu64 ",%" PRIu64 ",%.6f,%.0f,%.0f,%.0f\n", program.c_str(), p.type_name.c_str(), p.workers,
              p.events, seconds, static_cast<double>(expected) / seconds, mem.channel_bytes, mem.task_bytes);
}

}  // namespace lab::chan
