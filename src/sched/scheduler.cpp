// The multi-thread runtime's shared state; the design note is in scheduler.hpp.
#include "scheduler.hpp"

#include <algorithm>
#include <span>
#include <stdexcept>
#include <string>
#include <system_error>

#include <corio/errors.hpp>

#include "core/thread_marks.hpp"

namespace corio::detail {

namespace {
constexpr auto drain_grace = std::chrono::seconds(1);
}  // namespace

scheduler::scheduler(scheduler_options options)
    : idle_(options.workers),
      blocking_(options.max_blocking_threads, blocking_keep_alive),
      registries_(options.workers + 1),
      sink_(std::make_shared<const failure_sink>(options.on_unhandled_exception
                                                     ? std::move(options.on_unhandled_exception)
                                                     : failure_sink(print_unhandled_exception))) {
  workers_.reserve(options.workers);
  for (std::size_t i = 0; i < options.workers; ++i) {
    workers_.push_back(std::make_unique<worker>(*this, i, options.backend));
    io_slots_.push_back(&workers_.back()->io());
  }
  for (auto& each : workers_) {
    each->io().set_siblings(io_slots_);  // stand-ins while a worker cannot make its reactor
  }
  threads_.reserve(options.workers);
  try {
    for (auto& each : workers_) {
      threads_.emplace_back([w = each.get()] { w->run(); });
    }
  } catch (const std::system_error& error) {
    shutdown();  // the workers already started: nothing was spawned yet, so they just leave
    throw std::system_error(error.code(), "corio::runtime: cannot start worker thread " +
                                              std::to_string(threads_.size() + 1) + " of " +
                                              std::to_string(options.workers));
  }
}

scheduler::~scheduler() { shutdown(); }

namespace {

// The shutdowns this thread is running: a frame destroyed in step 5 or 7 may call shutdown() again on
// one of them (a guard object; the last owner of a runtime), and that call must return, not wait for
// the lock its own thread holds (runtimes shutting each other down nest).
using shutting_down_mark = thread_mark<scheduler>;

}  // namespace

void scheduler::shutdown() {
  if (local_worker() != nullptr) {
    throw std::logic_error("corio::runtime: shutdown from one of its own workers would join itself");
  }
  if (blocking_.runs_this_thread()) {
    throw std::logic_error("corio::runtime: shutdown from one of its own spawn_blocking threads would join itself");
  }
  if (shutting_down_mark::find(this) != nullptr) {
    return;
  }
  std::lock_guard guard(shutdown_mutex_);
  if (shut_down_) {
    return;
  }
  shut_down_ = true;
  shutting_down_mark running(this);
  for (root_registry& registry : registries_) {                                           // 1
    registry.close();
  }
  for (root_registry& registry : registries_) {                                           // 2
    registry.for_each([](root_base& root) { root.request_stop(); });
  }
  auto deadline = std::chrono::steady_clock::now() + drain_grace;                         // 3
  drain_deadline_ns_.store(std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch()).count(),
                           std::memory_order_relaxed);
  draining_.store(true, std::memory_order_seq_cst);
  wake_all_sleepers();
  for (std::thread& thread : threads_) {                                                  // 4
    thread.join();
  }
  std::vector<root_base*> roots;                                                          // 5
  for (root_registry& registry : registries_) {
    registry.take_all(roots);
  }
  auto waiting_for_pool = std::partition(roots.begin(), roots.end(), [](const root_base* root) {
    return root->blocking_waits.load(std::memory_order_relaxed) == 0;
  });
  root_registry::destroy_newest_first(std::span(roots.begin(), waiting_for_pool));
  blocking_.shutdown();                                                                   // 6
  inject_.clear();                                                                        // 7
  root_registry::destroy_newest_first(std::span(waiting_for_pool, roots.end()));
}

bool scheduler::drain_deadline_passed() const noexcept {
  auto now = std::chrono::steady_clock::now().time_since_epoch();
  return std::chrono::duration_cast<std::chrono::nanoseconds>(now).count() >=
         drain_deadline_ns_.load(std::memory_order_relaxed);
}

bool scheduler::tasks_unfinished() {
  return std::any_of(registries_.begin(), registries_.end(), [](root_registry& registry) { return !registry.empty(); });
}

worker* scheduler::local_worker() const noexcept {
  worker* here = current_worker;
  return here != nullptr && &here->owner() == this ? here : nullptr;
}

void scheduler::inject_and_notify(std::coroutine_handle<> handle) {
  inject_.push(handle.address());
  notify_work();
}

void scheduler::schedule(std::coroutine_handle<> handle) noexcept {
  if (worker* here = local_worker()) {
    here->push(handle, true);
  } else {
    inject_and_notify(handle);
  }
}

// A reactor's reap: one batch onto the reaping worker's queue and one notification.
void scheduler::schedule_batch(std::span<const std::coroutine_handle<>> handles) noexcept {
  if (handles.empty()) {
    return;
  }
  if (worker* here = local_worker()) {
    here->push_batch(handles);
    return;
  }
  for (std::coroutine_handle<> handle : handles) {
    inject_.push(handle.address());
  }
  notify_work();
}

void scheduler::yield_current(std::coroutine_handle<> handle) {
  if (worker* here = local_worker()) {
    here->push(handle, false);
  } else {
    inject_and_notify(handle);
  }
}

void scheduler::yield_for_budget(std::coroutine_handle<> handle) {
  if (worker* here = local_worker()) {
    here->push_budget_yield(handle);
  } else {
    inject_and_notify(handle);
  }
}

unsigned scheduler::local_shard() const noexcept {
  worker* here = local_worker();
  return static_cast<unsigned>(here != nullptr ? here->index() : workers_.size());
}

void scheduler::adopt(root_base& root) {
  worker* here = local_worker();
  root.shard_ = local_shard();
  if (!registries_[root.shard_].try_add(root)) {
    throw runtime_stopped("corio::runtime: spawning on a runtime that is shut down");
  }
  if (here != nullptr) {
    here->push(root.self_, false);
  } else {
    inject_and_notify(root.self_);
  }
}

void scheduler::forget(root_base& root) noexcept { registries_[root.shard_].remove(root); }

// Only a root that tried to leave (schedule_on) and was refused comes here: the thread is still one of
// our workers, so step 6 of a shutdown has not run yet, and the root is taken back even if closed.
bool scheduler::attach(root_base& root) noexcept {
  root.shard_ = local_shard();
  registries_[root.shard_].add(root);
  root.owner_ = this;
  return true;
}

void scheduler::report_unhandled(std::exception_ptr failure) noexcept {
  try {
    (*sink_)(failure);
  } catch (...) {
    print_unhandled_exception(failure);
  }
}

void scheduler::notify_work() noexcept {
  long index = idle_.pick_worker_to_wake();
  if (index >= 0) {
    workers_[static_cast<std::size_t>(index)]->unpark();
  }
}

void scheduler::wake_all_sleepers() noexcept {
  for (long index = idle_.pick_any_sleeper(); index >= 0; index = idle_.pick_any_sleeper()) {
    workers_[static_cast<std::size_t>(index)]->unpark();
  }
}

bool scheduler::work_visible() const noexcept {
  if (!inject_.empty()) {
    return true;
  }
  for (const auto& each : workers_) {
    if (each->has_queued_work()) {
      return true;
    }
  }
  return false;
}

}  // namespace corio::detail
