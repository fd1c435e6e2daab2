#pragma once
// The randomized networking stress test's shared pieces (net_stress_test.cpp runs it). Each round
// draws a scenario from a seed (executors, clients, message sizes, deadlines, operations raced against
// sleeps in when_any, writes and reads paired in when_all, cancellations and closes from tasks and
// threads, executors destroyed mid-flight) and checks what a user may rely on: every byte echoed in
// order to the connection that sent it, only documented errors where something was disrupted, every
// operation ending, and no descriptor left open after the round. The seed fixes the scenario, not the
// threads' interleaving: a failure names its seed, round and scenario, and rerunning that round
// (CORIO_STRESS_SEED, CORIO_STRESS_FIRST_ROUND, CORIO_STRESS_ROUNDS) reproduces it often, not always.
//
// Threads: a round's tasks run on one or two executors (an event loop on its own thread, or a runtime of
// one or two workers); the test's thread disrupts them at planned times. failure_log is the one object
// every thread writes to.
#include <corio/errors.hpp>
#include <corio/event_loop.hpp>
#include <corio/io_backend.hpp>
#include <corio/runtime.hpp>
#include <corio/task.hpp>
#include <corio/time.hpp>
#include <corio/when_any.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <variant>
#include <vector>

namespace corio::stress {

/// A seeded source of choices (splitmix64). Not thread-safe: each task that draws owns one.
class random {
 public:
  explicit random(std::uint64_t seed) noexcept : state_(seed) {}
  std::uint64_t next() noexcept;
  /// Uniform in [0, n); 0 when n is 0.
  std::uint64_t below(std::uint64_t n) noexcept { return n == 0 ? 0 : next() % n; }
  /// Uniform in [low, high].
  std::uint64_t between(std::uint64_t low, std::uint64_t high) noexcept { return low + below(high - low + 1); }
  int between(int low, int high) noexcept {
    return static_cast<int>(between(static_cast<std::uint64_t>(low), static_cast<std::uint64_t>(high)));
  }
  bool chance(double probability) noexcept;

 private:
  std::uint64_t state_;
};

/// What went wrong in a run, from any thread. A round names itself first (begin_round), so every
/// failure carries its seed, round and scenario; `state` describes the round's progress for the
/// watchdog's report of a hang.
class failure_log {
 public:
  void begin_round(std::uint64_t seed, int round, std::string scenario);
  /// The round's scenario in full, once drawn: failures from here on carry it.
  void describe_scenario(const std::string& scenario);
  void describe_state(std::function<std::string()> state);
  /// Adds a failure, formatted as by printf.
  void fail(const char* format, ...) __attribute__((format(printf, 2, 3)));
  std::vector<std::string> failures() const;
  /// The current round, its scenario and state: what a hang report prints.
  std::string current() const;

 private:
  mutable std::mutex mutex_;
  std::string round_;
  std::string scenario_;  // empty until describe_scenario
  std::function<std::string()> state_;
  std::vector<std::string> failures_;
};

/// The executor a round's tasks run on: an event loop run on its own thread, or a runtime. An
/// exception that escapes a task is a failure.
class executor_under_test {
 public:
  executor_under_test(io_backend backend, bool event_loop, int workers, failure_log& log);
  ~executor_under_test() { stop(); }
  executor_under_test(const executor_under_test&) = delete;
  executor_under_test& operator=(const executor_under_test&) = delete;

  /// Any thread, tasks of another executor included: starts `body` detached; once stop() has begun,
  /// destroys it unstarted instead.
  void spawn(task<void> body);
  /// Stops the loop and joins its thread, or shuts the runtime down (cancelling every task); then
  /// destroys the executor. Idempotent.
  void stop();

 private:
  std::mutex mutex_;  // over the two pointers: spawn() against stop()
  std::unique_ptr<corio::event_loop> loop_;
  std::thread loop_thread_;
  std::unique_ptr<corio::runtime> runtime_;
};

/// Byte `offset` of client `stream`'s data: every client's stream differs, so bytes that reach
/// another connection do not match.
std::byte pattern_byte(std::uint32_t stream, std::uint64_t offset) noexcept;

/// The errors an operation may end with when its task was cancelled, its socket closed or shut down,
/// or its peer disrupted (README, Limitations): none of them means data was corrupted.
bool documented_disruption(const std::error_code& error) noexcept;

std::string describe(const std::error_code& error);

/// Awaits `operation` (a socket operation in its error_code form, or a task of them that stores into
/// `error`) under a deadline of `deadline_us` microseconds, or with none if that is 0. An expiry reads
/// as the error_code form reports it, std::errc::timed_out in `error`, for a task too (with_timeout
/// ends a task by throwing corio::timed_out); the task then yields `Result{}`.
template <class Result, class Operation>
task<Result> within_deadline(int deadline_us, Operation operation, std::error_code& error) {
  if (deadline_us <= 0) {
    co_return co_await std::move(operation);
  }
  try {
    co_return co_await corio::with_timeout(std::chrono::microseconds(deadline_us), std::move(operation));
  } catch (const corio::timed_out&) {
    error = std::make_error_code(std::errc::timed_out);
  }
  co_return Result{};
}

/// within_deadline, raced in when_any against a sleep of `race_us` microseconds (none if 0), as a
/// select on an operation and a timer is (Go's select with time.After, tokio::select! with a sleep):
/// when_any cancels whichever loses. The operation is its operand itself, or with_timeout's awaitable
/// around it, never a task of the test's: a task that finished reading as it lost would drop what it
/// read (README, Limitations, when_any), which is not what this tests. A sleep that wins reads as an
/// expiry (std::errc::timed_out in `error`, `Result{}`), whatever the cancelled operation stored there.
template <class Result, class Operation>
task<Result> within_limits(int deadline_us, int race_us, Operation operation, std::error_code& error) {
  if (race_us <= 0) {
    co_return co_await within_deadline<Result>(deadline_us, std::move(operation), error);
  }
  auto sleeping = corio::sleep_for(std::chrono::microseconds(race_us));
  std::variant<Result, std::monostate> first;
  try {
    if (deadline_us <= 0) {
      first = co_await corio::when_any(std::move(operation), std::move(sleeping));
    } else {
      first = co_await corio::when_any(corio::with_timeout(std::chrono::microseconds(deadline_us), std::move(operation)),
                                       std::move(sleeping));
    }
  } catch (const corio::timed_out&) {
    first.template emplace<1>();
  }
  if (first.index() == 1) {
    error = std::make_error_code(std::errc::timed_out);
    co_return Result{};
  }
  co_return std::move(std::get<0>(first));
}

/// Polls `done` every 200 us for up to `limit`; whether it became true.
bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds limit);

/// The rounds. Each returns once every task it started has ended or its executors were destroyed;
/// `log` gets its scenario and failures.
void tcp_round(random& choices, io_backend backend, failure_log& log);
void udp_round(random& choices, io_backend backend, failure_log& log);
void listener_round(random& choices, io_backend backend, failure_log& log);

}  // namespace corio::stress
