#pragma once
// The loop-local FIFO of coroutines ready to resume: a growable power-of-two ring.
// Loop-local: only the owning loop's thread touches it, so there are no atomics.
#include <bit>
#include <coroutine>
#include <cstddef>
#include <memory>

namespace corio::detail {

class run_queue {
 public:
  run_queue() : slots_(std::make_unique<std::coroutine_handle<>[]>(initial_capacity)), mask_(initial_capacity - 1) {}

  bool empty() const noexcept { return head_ == tail_; }
  std::size_t size() const noexcept { return tail_ - head_; }

  void push(std::coroutine_handle<> handle) {
    if (tail_ - head_ > mask_) [[unlikely]] {
      return grow_and_push(handle);
    }
    slots_[tail_++ & mask_] = handle;
  }

  std::coroutine_handle<> pop() noexcept { return slots_[head_++ & mask_]; }

  void clear() noexcept { head_ = tail_; }

 private:
  static constexpr std::size_t initial_capacity = 256;

  // Out of line, and push's last call: inlined (or followed by the store), it made every push (each
  // yield and wake-up) save and restore registers.
  [[gnu::noinline]] void grow_and_push(std::coroutine_handle<> handle) {
    grow();
    slots_[tail_++ & mask_] = handle;
  }

  void grow() {
    std::size_t capacity = mask_ + 1;
    auto bigger = std::make_unique<std::coroutine_handle<>[]>(capacity * 2);
    for (std::size_t i = 0; i < capacity; ++i) {
      bigger[i] = slots_[(head_ + i) & mask_];
    }
    slots_ = std::move(bigger);
    mask_ = capacity * 2 - 1;
    head_ = 0;
    tail_ = capacity;
  }

  std::unique_ptr<std::coroutine_handle<>[]> slots_;
  std::size_t mask_;
  std::size_t head_ = 0;
  std::size_t tail_ = 0;
};

}  // namespace corio::detail
