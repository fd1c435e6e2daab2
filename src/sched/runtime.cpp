// corio::runtime: the public face of the scheduler in scheduler.hpp.
#include <corio/runtime.hpp>

#include <sched.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include <corio/event_loop.hpp>

#include "scheduler.hpp"
#include "worker.hpp"

namespace corio {
namespace {

// The CPUs the calling thread may run on (its affinity mask, which taskset or a container's cpuset
// sets for the whole process), else the online ones.
std::size_t default_workers() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0 && CPU_COUNT(&allowed) > 0) {
    return static_cast<std::size_t>(CPU_COUNT(&allowed));
  }
  unsigned online = std::thread::hardware_concurrency();
  return online == 0 ? 1 : online;
}

std::unique_ptr<detail::scheduler> make_scheduler(runtime::options opts) {
  if (opts.workers > runtime::max_workers) {
    throw std::invalid_argument("corio::runtime: options.workers = " + std::to_string(opts.workers) +
                                " is more than " + std::to_string(runtime::max_workers));
  }
  if (opts.max_blocking_threads == 0) {
    throw std::invalid_argument("corio::runtime: options.max_blocking_threads must be at least 1");
  }
  return std::make_unique<detail::scheduler>(detail::scheduler_options{
      .workers = opts.workers == 0 ? default_workers() : opts.workers,
      .max_blocking_threads = opts.max_blocking_threads,
      .on_unhandled_exception = std::move(opts.on_unhandled_exception),
      .backend = opts.backend});
}

}  // namespace

namespace detail {

blocking_pool* current_blocking_pool() noexcept {
  return current_worker != nullptr ? &current_worker->owner().blocking() : loop_blocking_pool();
}

}  // namespace detail

runtime::runtime() : runtime(options{}) {}

runtime::runtime(options opts) : scheduler_(make_scheduler(std::move(opts))) {}

runtime::~runtime() = default;

void runtime::shutdown() { scheduler_->shutdown(); }

std::size_t runtime::workers() const noexcept { return scheduler_->worker_count(); }

detail::executor& runtime::executor() noexcept { return *scheduler_; }

}  // namespace corio
