// corio::event_loop; the design note is in include/corio/event_loop.hpp.
#include <corio/event_loop.hpp>

#include <stdexcept>

namespace corio {
namespace detail {

thread_local constinit event_loop* current_loop = nullptr;
thread_local constinit executor* current_executor = nullptr;

void root_promise::finish::await_suspend(root_handle self) const noexcept {
  self.promise().loop_->forget_root(self.promise());
  self.destroy();
}

void root_promise::unhandled_exception() noexcept {
  if (!loop_->error_) {
    loop_->error_ = std::current_exception();
  }
}

root_task make_root(task<void> body) { co_await std::move(body); }

}  // namespace detail

namespace {
// A round resumes at most this many coroutines, then gives posted functors a turn (Go and tokio
// look at their injection queue every 61 ticks for the same reason).
constexpr std::size_t ready_batch = 64;
// How many posted functors one round may run before the ready queue gets its turn again.
constexpr std::size_t post_batch = 1024;
}  // namespace

class event_loop::running_scope {
 public:
  explicit running_scope(event_loop& loop) {
    if (detail::current_loop != nullptr) {
      throw std::logic_error("corio::event_loop: this thread is already running a loop");
    }
    detail::current_loop = &loop;
    detail::current_executor = &loop;
  }
  ~running_scope() {
    detail::current_loop = nullptr;
    detail::current_executor = nullptr;
  }
  running_scope(const running_scope&) = delete;
  running_scope& operator=(const running_scope&) = delete;
};

event_loop::event_loop() : posts_(parker_) {}

event_loop::~event_loop() {
  posts_.close();
  ready_.clear();
  while (roots_ != nullptr) {
    detail::root_promise* root = roots_;
    forget_root(*root);
    detail::root_handle::from_promise(*root).destroy();
  }
}

void event_loop::spawn(task<void> body) {
  if (!body.valid()) {
    throw invalid_task("corio::event_loop::spawn: empty or finished task");
  }
  if (stopped()) {
    throw loop_stopped("corio::event_loop::spawn: the loop is stopped");
  }
  detail::root_handle root = detail::make_root(std::move(body)).handle;
  adopt_root(root.promise());
  ready_.push(root);
}

void event_loop::adopt_root(detail::root_promise& root) {
  root.loop_ = this;
  root.next_ = roots_;
  if (roots_ != nullptr) {
    roots_->prev_ = &root;
  }
  roots_ = &root;
}

void event_loop::forget_root(detail::root_promise& root) noexcept {
  if (root.prev_ != nullptr) {
    root.prev_->next_ = root.next_;
  } else {
    roots_ = root.next_;
  }
  if (root.next_ != nullptr) {
    root.next_->prev_ = root.prev_;
  }
}

void event_loop::stop() noexcept {
  posts_.close();
  parker_.unpark_if_parked();
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
  if (error_) {
    std::rethrow_exception(std::exchange(error_, nullptr));
  }
}

// One round: a batch of ready coroutines, then a batch of posted functors. Returns whether it did
// anything.
bool event_loop::run_one_round() {
  bool fired = !timers_.empty() && timers_.fire_due(detail::timer_queue::clock::now()) != 0;
  std::size_t resumed = 0;
  for (; resumed < ready_batch && !ready_.empty(); ++resumed) {
    ready_.pop().resume();
  }
  rethrow_pending_error();
  return posts_.drain(post_batch) != 0 || resumed != 0 || fired;
}

std::optional<std::chrono::nanoseconds> event_loop::park_timeout() const noexcept {
  auto earliest = timers_.earliest();
  if (!earliest) {
    return std::nullopt;
  }
  return *earliest - detail::timer_queue::clock::now();
}

void event_loop::run() {
  running_scope scope(*this);
  while (!stopped()) {
    if (run_one_round() || !ready_.empty()) {
      continue;
    }
    parker_.prepare_park();
    if (stopped() || posts_.has_pending()) {
      parker_.cancel_park();
      continue;
    }
    parker_.park(park_timeout());
  }
}

void event_loop::run_until_idle() {
  running_scope scope(*this);
  while (run_one_round() || !ready_.empty() || posts_.has_pending()) {
  }
}

}  // namespace corio
