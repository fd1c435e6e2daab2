// The shared pieces of the networking stress test (net_stress.hpp).
#include "stress/net/net_stress.hpp"

#include <corio/errors.hpp>
#include <corio/net/error.hpp>

#include <cstdarg>
#include <cstdio>
#include <exception>
#include <utility>

namespace corio::stress {

std::uint64_t random::next() noexcept {
  std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

bool random::chance(double probability) noexcept {
  return static_cast<double>(next() >> 11) * 0x1.0p-53 < probability;
}

void failure_log::begin_round(std::uint64_t seed, int round, std::string scenario) {
  std::lock_guard lock(mutex_);
  round_ = "seed " + std::to_string(seed) + " round " + std::to_string(round) + " (" + scenario + ")";
  scenario_.clear();
  state_ = nullptr;
}

void failure_log::describe_scenario(const std::string& scenario) {
  std::lock_guard lock(mutex_);
  scenario_ = scenario;
}

void failure_log::describe_state(std::function<std::string()> state) {
  std::lock_guard lock(mutex_);
  state_ = std::move(state);
}

void failure_log::fail(const char* format, ...) {
  char text[1024];
  va_list arguments;
  va_start(arguments, format);
  std::vsnprintf(text, sizeof text, format, arguments);
  va_end(arguments);
  std::lock_guard lock(mutex_);
  failures_.push_back(round_ + ": " + text + (scenario_.empty() ? "" : "\n  in " + scenario_));
}

std::vector<std::string> failure_log::failures() const {
  std::lock_guard lock(mutex_);
  return failures_;
}

std::string failure_log::current() const {
  std::lock_guard lock(mutex_);
  return round_ + (scenario_.empty() ? "" : "\n" + scenario_) + (state_ ? "\n" + state_() : std::string());
}

executor_under_test::executor_under_test(io_backend backend, bool event_loop, int workers, failure_log& log) {
  if (event_loop) {
    loop_ = std::make_unique<corio::event_loop>(backend);
    loop_thread_ = std::thread([loop = loop_.get(), &log] {
      try {
        loop->run();
      } catch (const std::exception& error) {
        log.fail("event_loop::run threw: %s", error.what());
      }
    });
    return;
  }
  corio::runtime::options options;
  options.workers = static_cast<std::size_t>(workers);
  options.backend = backend;
  options.on_unhandled_exception = [&log](std::exception_ptr thrown) {
    try {
      std::rethrow_exception(thrown);
    } catch (const std::exception& error) {
      log.fail("a task threw: %s", error.what());
    } catch (...) {
      log.fail("a task threw something that is not a std::exception");
    }
  };
  runtime_ = std::make_unique<corio::runtime>(std::move(options));
}

void executor_under_test::spawn(task<void> body) {
  std::lock_guard lock(mutex_);
  if (loop_) {
    loop_->spawn(std::move(body));
  } else if (runtime_) {
    runtime_->spawn(std::move(body)).detach();
  }
}

void executor_under_test::stop() {
  std::unique_ptr<corio::event_loop> loop;
  std::unique_ptr<corio::runtime> runtime;
  {
    std::lock_guard lock(mutex_);  // not held while it stops: its tasks may spawn on the other executor
    loop = std::move(loop_);
    runtime = std::move(runtime_);
  }
  if (loop) {
    loop->stop();
    loop_thread_.join();
  }
}

std::byte pattern_byte(std::uint32_t stream, std::uint64_t offset) noexcept {
  std::uint64_t z = (std::uint64_t{stream} << 40) ^ (offset >> 3) ^ 0x1234567ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<std::byte>(z >> (8 * (offset & 7)));
}

bool documented_disruption(const std::error_code& error) noexcept {
  return !error || error == std::errc::operation_canceled || error == std::errc::timed_out ||
         error == std::errc::connection_reset || error == std::errc::broken_pipe ||
         error == std::errc::bad_file_descriptor || error == std::errc::not_connected ||
         error == corio::net::errc::end_of_stream;
}

std::string describe(const std::error_code& error) {
  return error ? std::string(error.category().name()) + ":" + std::to_string(error.value()) + " " + error.message()
               : "no error";
}

bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds limit) {
  auto give_up = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > give_up) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

}  // namespace corio::stress
