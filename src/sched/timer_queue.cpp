// Min-heap of intrusive timers; the design note is in include/corio/detail/timer_queue.hpp.
#include <corio/detail/timer_queue.hpp>

namespace corio::detail {

bool timer_queue::arm(timer& t) {
  std::lock_guard lock(mutex_);
  heap_.push_back(&t);
  t.index_ = heap_.size() - 1;
  sift_up(t.index_);
  publish_earliest();
  return heap_.front() == &t;
}

bool timer_queue::disarm(timer& t) noexcept {
  std::lock_guard lock(mutex_);
  if (t.index_ == timer::not_armed) {
    return false;
  }
  remove_at(t.index_);
  publish_earliest();
  return true;
}

std::size_t timer_queue::fire_due() noexcept {
  auto until = time_until_earliest();
  if (!until || *until > clock::duration::zero()) {
    return 0;
  }
  clock::time_point now = clock::now();
  std::lock_guard lock(mutex_);
  std::size_t fired = 0;
  while (!heap_.empty() && heap_.front()->deadline_ <= now) {
    timer* due = heap_.front();
    remove_at(0);
    due->fire_(*due);
    ++fired;
  }
  publish_earliest();
  return fired;
}

std::optional<timer_queue::clock::duration> timer_queue::time_until_earliest() const noexcept {
  std::int64_t ns = earliest_ns_.load(std::memory_order_seq_cst);
  if (ns == none) {
    return std::nullopt;
  }
  return clock::time_point(std::chrono::nanoseconds(ns)) - clock::now();
}

void timer_queue::publish_earliest() noexcept {
  std::int64_t ns = heap_.empty() ? none
                                  : std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        heap_.front()->deadline_.time_since_epoch())
                                        .count();
  earliest_ns_.store(ns, std::memory_order_seq_cst);
}

void timer_queue::place(std::size_t index, timer* t) noexcept {
  heap_[index] = t;
  t->index_ = index;
}

void timer_queue::sift_up(std::size_t index) noexcept {
  timer* moving = heap_[index];
  while (index > 0) {
    std::size_t parent = (index - 1) / 2;
    if (heap_[parent]->deadline_ <= moving->deadline_) {
      break;
    }
    place(index, heap_[parent]);
    index = parent;
  }
  place(index, moving);
}

void timer_queue::sift_down(std::size_t index) noexcept {
  timer* moving = heap_[index];
  std::size_t size = heap_.size();
  for (;;) {
    std::size_t child = 2 * index + 1;
    if (child >= size) {
      break;
    }
    if (child + 1 < size && heap_[child + 1]->deadline_ < heap_[child]->deadline_) {
      ++child;
    }
    if (moving->deadline_ <= heap_[child]->deadline_) {
      break;
    }
    place(index, heap_[child]);
    index = child;
  }
  place(index, moving);
}

void timer_queue::remove_at(std::size_t index) noexcept {
  timer* removed = heap_[index];
  timer* last = heap_.back();
  heap_.pop_back();
  removed->index_ = timer::not_armed;
  if (last == removed) {
    return;
  }
  place(index, last);
  if (index > 0 && last->deadline_ < heap_[(index - 1) / 2]->deadline_) {
    sift_up(index);
  } else {
    sift_down(index);
  }
}

}  // namespace corio::detail
