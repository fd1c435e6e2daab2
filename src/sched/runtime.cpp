// corio::runtime: the public face of the scheduler in scheduler.hpp.
#include <corio/runtime.hpp>

#include <thread>

#include "scheduler.hpp"
#include "worker.hpp"

namespace corio {
namespace {

std::size_t default_workers() {
  unsigned online = std::thread::hardware_concurrency();
  return online == 0 ? 1 : online;
}

}  // namespace

namespace detail {

blocking_pool* current_blocking_pool() noexcept {
  return current_worker != nullptr ? &current_worker->owner().blocking() : nullptr;
}

}  // namespace detail

runtime::runtime() : runtime(options{}) {}

runtime::runtime(options opts)
    : scheduler_(std::make_unique<detail::scheduler>(detail::scheduler_options{
          .workers = opts.workers == 0 ? default_workers() : opts.workers,
          .max_blocking_threads = opts.max_blocking_threads,
          .on_unhandled_exception = std::move(opts.on_unhandled_exception),
          .backend = opts.backend})) {}

runtime::~runtime() = default;

void runtime::shutdown() { scheduler_->shutdown(); }

std::size_t runtime::workers() const noexcept { return scheduler_->worker_count(); }

detail::executor& runtime::executor() noexcept { return *scheduler_; }

}  // namespace corio
