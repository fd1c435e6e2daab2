// One runtime worker; the design note is in worker.hpp.
#include "worker.hpp"

#include <algorithm>
#include <chrono>
#include <optional>

#include <corio/detail/coop_budget.hpp>

#include "scheduler.hpp"

namespace corio::detail {

thread_local constinit worker* current_worker = nullptr;

namespace {
constexpr std::uint64_t maintenance_interval = 61;
constexpr std::chrono::microseconds reactor_spin{50};
constexpr auto chain_bound = std::chrono::milliseconds(1);
constexpr std::size_t inject_batch = worker::queue_capacity / 2;
constexpr std::size_t min_reap = 16;
constexpr auto drain_wait = std::chrono::milliseconds(1);

std::coroutine_handle<> as_handle(void* address) noexcept { return std::coroutine_handle<>::from_address(address); }

bool is_due(std::optional<timer_queue::clock::duration> until_timer) noexcept {
  return until_timer && *until_timer <= timer_queue::clock::duration::zero();
}
}  // namespace

worker::worker(scheduler& owner, std::size_t index, io_backend backend) noexcept
    : owner_(owner),
      index_(index),
      io_(parker_, owner, backend, true, queue_capacity),
      chain_clock_(chain_bound),
      spin_(reactor_spin),
      until_maintenance_(maintenance_interval),
      random_state_(static_cast<std::uint32_t>(index * 2654435761u + 1)) {}

void worker::run() {
  current_worker = this;
  current_executor = &owner_;
  current_timers = &timers_;
  io_slot::scope io_scope(io_);
  alone_ = owner_.worker_count() == 1;
  io_.set_exclusive(alone_);  // no stealing: a socket's multishot state may stay here
  for (;;) {
    std::coroutine_handle<> next = next_task();
    if (!next) {
      next = search();
    }
    if (next) {
      if (searching_) {
        stop_searching();  // however the work was found, this worker is no longer looking
      }
      refill_coop_budget();
      resume_top(next);
      if (owner_.draining() && owner_.drain_deadline_passed()) {
        break;
      }
      continue;
    }
    if (owner_.draining()) {
      if (owner_.drain_deadline_passed() || (!io_.has_work() && !owner_.tasks_unfinished())) {
        break;
      }
      // The cancelled operations end in the reactor's wait; a task's timers, channels and those of
      // other workers wake it too, or this short park ends and the loop looks again.
      parker_.park_unless_notified(drain_wait);
      continue;
    }
    park();
  }
  if (searching_) {
    stop_searching();
  }
  io_.shutdown();  // before the scheduler destroys frames, on this thread
  current_timers = nullptr;
  current_executor = nullptr;
  current_worker = nullptr;
}

void worker::push(std::coroutine_handle<> handle, bool woken) {
  if (!woken) {
    push_back_and_notify(handle);
  } else if (std::coroutine_handle<> displaced = std::exchange(lifo_, handle)) {
    push_back_and_notify(displaced);
  }
}

void worker::push_budget_yield(std::coroutine_handle<> handle) {
  if (lifo_ && !after_lifo_) {
    after_lifo_ = handle;
  } else {
    push_back_and_notify(handle);
  }
}

// Stealable work appeared: a sleeping worker may need waking. A batch reaped by our own reactor
// inside our park is ours to run the moment the park returns: leave the sleeper list first, so the
// waker below picks another sleeper instead of us (waking ourselves cost an eventfd write and one
// more io_uring_enter per loop turn).
void worker::push_batch(std::span<const std::coroutine_handle<>> handles) {
  std::size_t pushed = queue_.push_batch(handles.data(), handles.size(), [](std::coroutine_handle<> handle) {
    return handle.address();
  });
  for (std::coroutine_handle<> handle : handles.subspan(pushed)) {
    push_back(handle);  // the queue is full: these overflow to the injection queue
  }
  if (in_park_ && !left_sleep_) {
    leave_sleep();
    left_sleep_ = true;
  }
  owner_.notify_work();
}

void worker::push_back_and_notify(std::coroutine_handle<> handle) {
  push_back(handle);
  owner_.notify_work();
}

void worker::push_back(std::coroutine_handle<> handle) {
  if (!queue_.push(handle.address())) {
    overflow_to_inject(handle);
  }
}

// The local queue is full: move half of it, plus `handle`, to the injection queue in one batch.
void worker::overflow_to_inject(std::coroutine_handle<> handle) {
  void* batch[queue_capacity / 2 + 1];
  std::size_t count = queue_.pop_batch(batch, queue_capacity / 2);
  batch[count++] = handle.address();
  owner_.inject().push_batch(batch, count);
}

std::coroutine_handle<> worker::next_task() {
  if (--until_maintenance_ == 0) {
    until_maintenance_ = maintenance_interval;
    std::size_t queued = queue_.size();  // one snapshot for both: size() is two seq_cst loads
    io_.maintain(std::max(queue_capacity - queued, min_reap), maintenance_interval, queued);
    fire_due_timers();
    if (auto from_inject = take_from_inject()) {
      return from_inject;
    }
  }
  if (auto chained = next_in_chain()) {
    return chained;
  }
  in_chain_ = false;
  if (void* local = pop_local()) {
    return as_handle(local);
  }
  if (auto from_inject = take_from_inject()) {
    return from_inject;
  }
  if (fire_due_timers() && lifo_) {
    return std::exchange(lifo_, {});
  }
  if (void* local = pop_local()) {
    return as_handle(local);
  }
  return {};
}

// A slot's task if the chain may go on (see worker.hpp); else both slots go to the queue's back, and
// the caller takes the next task from the queue.
std::coroutine_handle<> worker::next_in_chain() {
  if (!lifo_ && !after_lifo_) {
    return {};
  }
  if (!in_chain_) {
    in_chain_ = true;
    chain_start_ = chain_clock_.now();
  } else if (chain_clock_.reached(chain_start_)) {
    if (lifo_) {
      push_back(std::exchange(lifo_, {}));
    }
    if (after_lifo_) {
      push_back(std::exchange(after_lifo_, {}));
    }
    owner_.notify_work();
    return {};
  }
  return std::exchange(lifo_ ? lifo_ : after_lifo_, {});
}

// Takes a batch from the injection queue: runs the first, queues the rest locally.
std::coroutine_handle<> worker::take_from_inject() {
  void* batch[inject_batch];
  std::size_t count = owner_.inject().pop_batch(batch, std::min(inject_batch, queue_room() + 1));
  for (std::size_t i = 1; i < count; ++i) {
    push_back(as_handle(batch[i]));
  }
  if (count > 1) {
    owner_.notify_work();
  }
  return count != 0 ? as_handle(batch[0]) : std::coroutine_handle<>{};
}

std::coroutine_handle<> worker::search() {
  if (!searching_) {
    if (!owner_.idle().try_begin_searching()) {
      return {};
    }
    searching_ = true;
  }
  std::size_t workers = owner_.worker_count();
  std::size_t start = random_below(workers);
  void* stolen[queue_capacity / 2 + 1];
  for (std::size_t i = 0; i < workers; ++i) {
    worker& victim = owner_.worker_at((start + i) % workers);
    if (&victim == this) {
      continue;
    }
    std::size_t count = victim.steal_half(stolen);
    if (count != 0) {
      for (std::size_t k = 1; k < count; ++k) {
        push_back(as_handle(stolen[k]));
      }
      return as_handle(stolen[0]);
    }
  }
  return take_from_inject();
}

// Found work while searching. The last searcher to stop wakes another: where there was work to steal
// there may be more, and nobody would otherwise be looking for it.
void worker::stop_searching() {
  searching_ = false;
  if (owner_.idle().end_searching()) {
    owner_.notify_work();
  }
}

bool worker::fire_due_timers() { return timers_.fire_due() != 0; }

// Before sleeping with I/O in flight, poll the reactor for a short while: a request/response peer
// usually answers within tens of microseconds, and catching that answer awake spares the sleep and
// the wake-up (on a VM, a halted vCPU and an IPI). Polls for `length` (spin_budget.hpp: shorter, down to
// a single poll, while peers answer later than a spin), and only while operations are pending, so
// an idle runtime still sleeps at once after one short spin. Not in the sleeper list yet: work pushed
// from outside meanwhile is seen through work_visible().
bool worker::spin_on_reactor(std::chrono::nanoseconds length) {
  const auto give_up = std::chrono::steady_clock::now() + length;
  for (bool first = true;; first = false) {
    io_.poll(queue_room());
    if (lifo_ || after_lifo_ || has_queued_work() || owner_.work_visible() || is_due(timers_.time_until_earliest())) {
      if (!first) {
        spin_.caught();  // found by waiting; what the first poll finds (a send it submitted) a lone poll finds too
      }
      return true;
    }
    if (!io_.has_pending() || std::chrono::steady_clock::now() >= give_up) {
      return false;
    }
  }
}

void worker::park() {
  if (!io_.has_pending() || owner_.draining()) {
    sleep();
    return;
  }
  const auto length = spin_.start();
  if (spin_on_reactor(length)) {
    return;
  }
  const auto slept_from = std::chrono::steady_clock::now();
  sleep();
  spin_.gave_up(length, std::chrono::steady_clock::now() - slept_from);
}

void worker::sleep() {
  idle_workers& idle = owner_.idle();
  idle.begin_sleep(index_, std::exchange(searching_, false));
  auto until_timer = timers_.time_until_earliest();
  bool timer_due = is_due(until_timer);
  if (owner_.work_visible() || owner_.draining() || timer_due) {
    leave_sleep();
    return;
  }
  in_park_ = true;
  parker_.park_unless_notified(until_timer);
  in_park_ = false;
  if (!std::exchange(left_sleep_, false)) {
    leave_sleep();
  }
}

// Off the sleeper list, either by ourselves or by a waker that may have counted us as searching.
void worker::leave_sleep() {
  searching_ = owner_.idle().leave_sleep(index_) == idle_workers::wake_reason::searching;
}

std::size_t worker::random_below(std::size_t bound) noexcept {
  random_state_ ^= random_state_ << 13;
  random_state_ ^= random_state_ >> 17;
  random_state_ ^= random_state_ << 5;
  return random_state_ % bound;
}

}  // namespace corio::detail
