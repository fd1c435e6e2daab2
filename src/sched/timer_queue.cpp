// One thread's timers; the design note is in include/corio/detail/timer_queue.hpp.
#include <corio/detail/timer_queue.hpp>

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "core/cpu_relax.hpp"

namespace corio::detail {

thread_local constinit timer_queue* current_timers = nullptr;

namespace {
constexpr std::size_t in_list = static_cast<std::size_t>(-1);  // timer_entry::index of a listed entry

std::int64_t nanoseconds_of(timer::clock::time_point t) noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}
}  // namespace

void timer::arm() {
  timer_queue* home = current_timers;
  if (home == nullptr) {
    throw std::logic_error("corio: a timer needs an event loop or runtime on this thread");
  }
  entry_ = &home->add(*this);
  home_ = home;
}

bool timer::disarm() noexcept {
  timer_entry& e = *std::exchange(entry_, nullptr);
  if (home_ == current_timers) {  // the owning thread: nothing can race with us
    if (e.state.load(std::memory_order_relaxed) == timer_entry::armed) {
      home_->remove(e);
      return true;
    }
    home_->recycle(e);  // fired
    return false;
  }
  std::uint8_t expected = timer_entry::armed;
  if (e.state.compare_exchange_strong(expected, timer_entry::cancelled, std::memory_order_acq_rel)) {
    home_->note_remote_cancel();  // the owner drops the entry when it pops it
    return true;
  }
  // The callback is running on the owning thread (it may request a stop, whose callbacks take locks).
  back_off_while([&] { return e.state.load(std::memory_order_acquire) != timer_entry::fired; });
  home_->give_back(e);
  return false;
}

timer_entry& timer_queue::add(timer& holder) {
  timer_entry& e = allocate();
  e.deadline_ns = nanoseconds_of(holder.deadline_);
  e.holder = &holder;
  e.state.store(timer_entry::armed, std::memory_order_relaxed);  // published to a remote holder by its resumption
  if (tail_ == nullptr || e.deadline_ns >= tail_->deadline_ns) {
    append(e);
  } else {
    heap_.push_back({e.deadline_ns, &e});
    sift_up(heap_.size() - 1);
  }
  return e;
}

void timer_queue::append(timer_entry& e) noexcept {
  e.index = in_list;
  e.prev = tail_;
  e.next = nullptr;
  (tail_ != nullptr ? tail_->next : head_) = &e;
  tail_ = &e;
  ++listed_;
}

void timer_queue::unlink(timer_entry& e) noexcept {
  (e.prev != nullptr ? e.prev->next : head_) = e.next;
  (e.next != nullptr ? e.next->prev : tail_) = e.prev;
  --listed_;
}

timer_entry* timer_queue::earliest() const noexcept {
  if (heap_.empty()) {
    return head_;
  }
  return head_ != nullptr && head_->deadline_ns < heap_.front().deadline_ns ? head_ : heap_.front().what;
}

void timer_queue::take(timer_entry& e) noexcept {
  if (e.index == in_list) {
    unlink(e);
  } else {
    pop_front();  // the earliest is the heap's top
  }
}

timer_entry& timer_queue::allocate() {
  if (free_ == nullptr) {
    free_ = returned_.exchange(nullptr, std::memory_order_acquire);
  }
  if (free_ == nullptr) {
    chunks_.push_back(std::make_unique<timer_entry[]>(chunk_size));
    timer_entry* chunk = chunks_.back().get();
    for (std::size_t i = 0; i < chunk_size; ++i) {
      chunk[i].next = i + 1 < chunk_size ? &chunk[i + 1] : nullptr;
    }
    free_ = chunk;
  }
  heap_.reserve(chunks_.size() * chunk_size);  // so the push in add() cannot throw after this
  timer_entry& e = *free_;
  free_ = e.next;
  return e;
}

void timer_queue::recycle(timer_entry& e) noexcept {
  e.state.store(timer_entry::free, std::memory_order_relaxed);
  e.next = free_;
  free_ = &e;
}

void timer_queue::give_back(timer_entry& e) noexcept {
  e.state.store(timer_entry::free, std::memory_order_relaxed);
  timer_entry* head = returned_.load(std::memory_order_relaxed);
  do {
    e.next = head;
  } while (!returned_.compare_exchange_weak(head, &e, std::memory_order_release, std::memory_order_relaxed));
}

void timer_queue::remove(timer_entry& e) noexcept {
  if (e.index == in_list) {
    unlink(e);
    recycle(e);
    return;
  }
  std::size_t index = e.index;
  slot last = heap_.back();
  heap_.pop_back();
  if (last.what != &e) {
    place(index, last);
    if (index > 0 && last.deadline_ns < heap_[(index - 1) / 2].deadline_ns) {
      sift_up(index);
    } else {
      sift_down(index);
    }
  }
  recycle(e);
}

void timer_queue::pop_front() noexcept {
  slot last = heap_.back();
  heap_.pop_back();
  if (!heap_.empty()) {
    place(0, last);
    sift_down(0);
  }
}

std::size_t timer_queue::fire_due() noexcept {
  if (empty()) {
    return 0;
  }
  if (4 * remote_cancels_.load(std::memory_order_relaxed) > static_cast<std::int64_t>(size())) {
    compact();
  }
  std::int64_t now = nanoseconds_of(clock::now());
  std::size_t fired = 0;
  for (timer_entry* due = earliest(); due != nullptr && due->deadline_ns <= now; due = earliest()) {
    timer_entry& e = *due;
    take(e);
    std::uint8_t expected = timer_entry::armed;
    if (!e.state.compare_exchange_strong(expected, timer_entry::firing, std::memory_order_acq_rel)) {
      remote_cancels_.fetch_sub(1, std::memory_order_relaxed);
      recycle(e);  // cancelled from another thread: its holder is gone
      continue;
    }
    timer& holder = *e.holder;
    holder.fire_(holder);
    e.state.store(timer_entry::fired, std::memory_order_release);  // from here the holder may free it
    ++fired;
  }
  return fired;
}

// Drops every entry cancelled from another thread, from the list and the heap (rebuilt from the rest).
void timer_queue::compact() noexcept {
  std::size_t kept = 0;
  std::int64_t dropped = 0;
  for (timer_entry* e = head_; e != nullptr;) {
    timer_entry* next = e->next;
    if (e->state.load(std::memory_order_acquire) == timer_entry::cancelled) {
      unlink(*e);
      recycle(*e);
      ++dropped;
    }
    e = next;
  }
  for (slot s : heap_) {
    if (s.what->state.load(std::memory_order_acquire) == timer_entry::cancelled) {
      recycle(*s.what);
      ++dropped;
    } else {
      heap_[kept++] = s;
    }
  }
  heap_.resize(kept);
  remote_cancels_.fetch_sub(dropped, std::memory_order_relaxed);
  std::make_heap(heap_.begin(), heap_.end(), [](slot a, slot b) { return a.deadline_ns > b.deadline_ns; });
  for (std::size_t i = 0; i < heap_.size(); ++i) {
    heap_[i].what->index = i;
  }
}

std::optional<timer_queue::clock::duration> timer_queue::time_until_earliest() const noexcept {
  timer_entry* first = earliest();
  if (first == nullptr) {
    return std::nullopt;
  }
  return std::chrono::nanoseconds(first->deadline_ns - nanoseconds_of(clock::now()));
}

void timer_queue::place(std::size_t index, slot s) noexcept {
  heap_[index] = s;
  s.what->index = index;
}

void timer_queue::sift_up(std::size_t index) noexcept {
  slot moving = heap_[index];
  while (index > 0) {
    std::size_t parent = (index - 1) / 2;
    if (heap_[parent].deadline_ns <= moving.deadline_ns) {
      break;
    }
    place(index, heap_[parent]);
    index = parent;
  }
  place(index, moving);
}

void timer_queue::sift_down(std::size_t index) noexcept {
  slot moving = heap_[index];
  std::size_t size = heap_.size();
  for (;;) {
    std::size_t child = 2 * index + 1;
    if (child >= size) {
      break;
    }
    if (child + 1 < size && heap_[child + 1].deadline_ns < heap_[child].deadline_ns) {
      ++child;
    }
    if (moving.deadline_ns <= heap_[child].deadline_ns) {
      break;
    }
    place(index, heap_[child]);
    index = child;
  }
  place(index, moving);
}

}  // namespace corio::detail
