// corio::event_loop; the design note is in include/corio/event_loop.hpp.
#include <corio/event_loop.hpp>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <thread>

#include <corio/join_handle.hpp>

#include "core/cpu_relax.hpp"

namespace corio {
namespace detail {

thread_local constinit event_loop* current_loop = nullptr;
thread_local constinit executor* current_executor = nullptr;
thread_local constinit int frames_in_teardown = 0;
thread_local constinit executor* current_sync_wait = nullptr;

blocking_pool* loop_blocking_pool() noexcept { return current_loop != nullptr ? &current_loop->blocking_ : nullptr; }

}  // namespace detail

namespace {

void spin_pause(int times) noexcept {
  for (int i = 0; i < times; ++i) {
    detail::cpu_relax();
  }
}

// A round resumes at most this many coroutines, then gives posted functors a turn (Go and tokio
// look at their injection queue every 61 ticks for the same reason).
constexpr std::size_t ready_batch = 64;
// How many posted functors one round may run before the ready queue gets its turn again.
constexpr std::size_t post_batch = 1024;
}  // namespace

// Marks the thread as running `loop` for one run(), run_until_idle() or block_on(). A thread that
// already runs a loop or a runtime worker may not (running this loop would take that one's place,
// and leave its tasks with no executor when it returns), nor may a second thread run the same loop.
class event_loop::running_scope {
 public:
  /// `start(context)`, if given, runs once the loop is this thread's to run, but before the thread is
  /// marked as running it: what it spawns is queued as from outside the loop, behind what was already.
  running_scope(event_loop& loop, void (*start)(void* context), void* context)
      : loop_(enter(loop)), io_scope_(loop.io_) {
    if (start != nullptr) {
      try {
        start(context);
      } catch (...) {
        loop_.running_.store(false, std::memory_order_release);
        throw;
      }
    }
    detail::current_loop = &loop;
    detail::current_executor = &loop;
    detail::current_timers = &loop.timers_;
  }
  ~running_scope() {
    detail::current_loop = nullptr;
    detail::current_executor = nullptr;
    detail::current_timers = nullptr;
    loop_.running_.store(false, std::memory_order_release);
  }
  running_scope(const running_scope&) = delete;
  running_scope& operator=(const running_scope&) = delete;

 private:
  static event_loop& enter(event_loop& loop) {
    if (detail::current_loop != nullptr) {
      throw std::logic_error("corio::event_loop: this thread is already running a loop");
    }
    if (detail::current_executor != nullptr) {
      throw std::logic_error("corio::event_loop: this thread is a runtime worker (co_await the task instead)");
    }
    if (loop.running_.exchange(true, std::memory_order_acquire)) {
      throw std::logic_error("corio::event_loop: another thread is running this loop");
    }
    return loop;
  }

  event_loop& loop_;
  detail::io_slot::scope io_scope_;
};

event_loop::event_loop() : event_loop(io_backend::automatic) {}

event_loop::event_loop(io_backend backend)
    : io_(*parker_, *this, backend, false, SIZE_MAX),
      posts_(parker_),
      errors_(std::make_shared<detail::loop_errors>()),
      sink_(std::make_shared<const detail::failure_sink>([errors = errors_](std::exception_ptr failure) {
        std::lock_guard lock(errors->mutex);
        if (!errors->loop_alive) {
          detail::print_unhandled_exception(failure);
        } else if (!errors->first) {
          errors->first = std::move(failure);
        }
      })),
      blocking_(detail::default_blocking_threads, detail::blocking_keep_alive) {}

event_loop::~event_loop() {
  if (running_.load(std::memory_order_acquire) && detail::current_loop != this) {
    // From another thread during run(): its frames and its parker would be freed under the thread
    // running it, which would sleep for good in a freed parker. Loud, as a runtime destroyed on its own
    // worker is. (On its own thread, from one of its tasks, it goes on: that is how std::exit() in a
    // task reaches a static loop, and the process ends right after.)
    std::fputs("corio::event_loop: destroyed by another thread while a thread runs it: stop() it and let "
               "run() return first\n",
               stderr);
    std::abort();
  }
  if (blocking_.runs_this_thread()) {
    std::fputs("corio::event_loop: destroyed by one of its own spawn_blocking calls, whose return the "
               "destruction would wait for\n",
               stderr);
    std::abort();
  }
  posts_.close();
  // A hop checked before this destructor began may still be completing on the thread it leaves; it
  // touches this loop until it has either posted here or given the root back.
  while (hops_in_flight_.load(std::memory_order_seq_cst) != 0) {
    std::this_thread::yield();
  }
  ready_.clear();
  io_.shutdown();
  roots_.destroy_all();
  posts_.discard();
  blocking_.shutdown();
  std::lock_guard lock(errors_->mutex);
  errors_->loop_alive = false;
}

void event_loop::spawn(task<void> body) {
  // No handle escapes, so nothing can ever cancel this task: skip the stop source.
  detail::spawn_on(*this, std::move(body), detail::cancellable::no).detach();
}

void event_loop::adopt(detail::root_base& root) {
  if (stopped() || !roots_.try_add(root)) {
    throw loop_stopped("corio::event_loop: spawning on a stopped loop");
  }
  schedule(root.self_);
}

bool event_loop::attach(detail::root_base& root) noexcept {
  if (!roots_.try_add(root)) {
    return false;
  }
  root.owner_ = this;
  return true;
}

void event_loop::report_unhandled(std::exception_ptr failure) noexcept { (*sink_)(std::move(failure)); }

// Runs in await_suspend, on the thread the coroutine is leaving: what can be refused at once.
void event_loop::check_hop(const detail::promise_base* chain) {
  if (chain != nullptr && chain->shares_executor_ && detail::current_executor != nullptr) {
    throw std::logic_error(
        "corio::schedule_on: a task under when_all/when_any or with_timeout cannot move to another executor alone "
        "(its siblings, or its deadline's timer, stay on this one)");
  }
  // Counted before the check, and both seq_cst, against the destructor's close then load of the count:
  // either this hop sees the loop stopped, or the destructor waits for it. (Counted after the check, a
  // destructor that began in between read no hop and freed the loop under it.)
  hops_in_flight_.fetch_add(1, std::memory_order_seq_cst);
  if (stopped()) {
    hops_in_flight_.fetch_sub(1, std::memory_order_release);
    throw loop_stopped("corio::schedule_on: the target loop is stopped");
  }
}

// Runs in resume_top, on the thread the coroutine left, once nothing there touches its chain. The
// root moves here before the coroutine is posted, so that from the moment this loop can resume it,
// this loop owns it; if the loop refuses (stopped or being destroyed meanwhile), the root goes back
// where it was and the caller resumes the coroutine there. Every hop that check_hop let through is
// counted in hops_in_flight_ until this returns (release), and the destructor waits for the count to
// reach zero (acquire) after closing the post queue, so it never destroys roots or members under a
// hop still completing.
bool event_loop::accept_hop(detail::promise_base* chain, std::coroutine_handle<> handle) noexcept {
  bool accepted = move_and_post(chain, handle);
  hops_in_flight_.fetch_sub(1, std::memory_order_release);  // the last touch of this loop
  return accepted;
}

bool event_loop::move_and_post(detail::promise_base* chain, std::coroutine_handle<> handle) noexcept {
  detail::root_base* root = chain != nullptr ? chain->root_ : nullptr;
  detail::executor* from = root != nullptr ? root->owner_ : nullptr;
  bool moves = root != nullptr && from != this;
  if (moves) {
    from->forget(*root);
    if (!attach(*root)) {
      from->attach(*root);
      return false;
    }
  }
  if (!posts_.push([this, handle] { ready_.push(handle); })) {
    if (moves) {
      forget(*root);  // the destructor waits for this hop before it takes the roots
      from->attach(*root);
    }
    return false;
  }
  return true;
}

namespace detail {

thread_local constinit schedule_on_awaiter* pending_hop = nullptr;

void complete_pending_hop() noexcept {
  while (schedule_on_awaiter* hop = std::exchange(pending_hop, nullptr)) {
    if (!hop->target_.accept_hop(hop->chain_, hop->handle_)) {
      hop->refused_ = true;
      hop->handle_.resume();  // where it was: its executor's thread, or the plain thread it ran on
    }
  }
}

void schedule_on_awaiter::await_resume() const {
  if (refused_) {
    throw loop_stopped("corio::schedule_on: the target loop stopped before the coroutine could move");
  }
}

}  // namespace detail

// Once closed, the loop may return from run() and be destroyed by its owner at once: the wake goes
// through a reference of this call's own, as post's does (post_queue.hpp).
void event_loop::stop() noexcept {
  std::shared_ptr<detail::parker> parker = parker_;
  posts_.close();
  parker->unpark_if_parked();
}

void event_loop::schedule(std::coroutine_handle<> handle) noexcept {
  if (detail::current_loop == this) {
    ready_.push(handle);
  } else {
    // Refused only once the loop is stopped; the frame then goes with the loop's roots.
    posts_.push([this, handle] { ready_.push(handle); });
  }
}

void event_loop::rethrow_pending_error() {
  std::exception_ptr failure;
  {
    std::lock_guard lock(errors_->mutex);
    failure = std::exchange(errors_->first, nullptr);
  }
  if (failure) {
    std::rethrow_exception(failure);
  }
}

// One round: due timers, a batch of ready coroutines, then a batch of posted functors. Returns how
// many of those it ran.
std::size_t event_loop::run_one_round() {
  io_.poll(SIZE_MAX);  // the ready queue grows: no room to respect
  std::size_t fired = timers_.fire_due();
  std::size_t resumed = 0;
  for (; resumed < ready_batch && !ready_.empty(); ++resumed) {
    detail::refill_coop_budget();
    detail::resume_top(ready_.pop());
  }
  rethrow_pending_error();
  return posts_.drain(post_batch) + resumed + fired;
}

// Before parking, an idle loop polls its post queue for a short while: a producer that posts again
// within microseconds (the common case under load) then costs no futex wake and no context switch.
// It looks only every 16 pauses: each look pulls the producers' tail cache lines over, and polling in
// a tight loop would make every post pay for that transfer. Every 8 looks it yields the CPU: when the
// scheduler has put the loop on the same core as its producer, spinning would only burn the producer's
// time slice (one-producer throughput was bimodal, 8-93 M/s, until this). The spin is bounded (~tens
// of microseconds) so an idle loop still sleeps almost at once.
bool event_loop::posts_arrive_soon() noexcept {
  constexpr int looks = 64;
  constexpr int pauses_per_look = 16;
  for (int look = 0; look < looks; ++look) {
    spin_pause(pauses_per_look);
    if (look % 8 == 7) {
      std::this_thread::yield();  // sharing a core with the producer: let it run
    }
    if (posts_.has_pending() || stopped()) {
      return true;
    }
  }
  return false;
}

void event_loop::run() { run_until(nullptr, nullptr, nullptr); }

void event_loop::run_until(void (*start)(void* context), bool (*done)(const void* context), void* context) {
  // A round that found only a trickle of work means the loop has caught up with its producers. Going
  // straight back would re-read each producer's tail (and the records just written) after every item
  // or two, moving those cache lines between cores on nearly every post; a short pause lets work
  // accumulate so the next round takes a batch. (Measured: one-producer post throughput went from a
  // steady ~32 M/s to ~90 M/s.)
  constexpr std::size_t trickle = 8;
  constexpr int trickle_pauses = 32;
  running_scope scope(*this, start, context);
  while (!stopped()) {
    std::size_t ran = run_one_round();
    if (done != nullptr && done(context)) {
      return;
    }
    if (ran >= trickle || !ready_.empty()) {
      continue;
    }
    if (ran != 0) {
      spin_pause(trickle_pauses);
      continue;
    }
    if (posts_arrive_soon()) {
      continue;
    }
    parker_->prepare_park();
    if (stopped() || posts_.has_pending()) {
      parker_->cancel_park();
      continue;
    }
    parker_->park(timers_.time_until_earliest());
  }
  // Functors accepted before the stop still run (the queue is closed and settled, so this ends): a
  // producer that posts, then makes another thread call stop(), sees its work done, whatever the drain
  // order; and a post that raced the stop either returned false or is drained here.
  posts_.settle();
  while (posts_.drain(post_batch) != 0) {
  }
}

void event_loop::run_until_idle() {
  running_scope scope(*this, nullptr, nullptr);
  while (run_one_round() != 0 || !ready_.empty() || posts_.has_pending()) {
  }
}

}  // namespace corio
