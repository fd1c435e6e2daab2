#pragma once
// detail::ring<T>: the FIFO of values buffered in a channel, and of the completions an io_uring socket
// keeps between reads (uring_source.cpp). Not thread-safe (the channel's lock, or the reactor's thread).
//
// Storage: slots the caller lends at construction (a bounded channel co-allocates them with its
// state, so a channel is one allocation) or slots the ring allocates itself. It grows only when a
// push finds it full: an unbounded channel doubles; a bounded one grows past its capacity only on the
// rare path that returns a value a cancelled receiver was handed (channel_state.hpp), so the hot path
// never allocates. Growing moves the values (T is nothrow-movable, asserted by the channel) and frees
// the old slots if the ring owned them.
// An emptied ring starts again at slot 0: a channel whose receiver keeps up reuses the same few cache
// lines instead of walking its whole buffer (with thousands of channels, the difference between the
// buffers' hot part fitting in the cache or not).
// Indices wrap by comparison, not modulo: the capacity need not be a power of two and a division per
// message would cost more than the rest of a push.
#include <cstddef>
#include <memory>
#include <new>
#include <optional>
#include <utility>

namespace corio::detail {

template <class T>
class ring {
 public:
  /// A ring over `capacity` lent, uninitialised slots (or none).
  ring(T* lent, std::size_t capacity) noexcept : slots_(lent), capacity_(capacity) {}
  ring(const ring&) = delete;
  ring& operator=(const ring&) = delete;
  ~ring() {
    clear();
    release_storage();
  }

  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }

  /// Appends; grows (may throw std::bad_alloc, leaving the ring unchanged) if full.
  void push_back(T&& value) {
    if (size_ == capacity_) {
      grow();
    }
    std::construct_at(slots_ + wrap(head_ + size_), std::move(value));
    ++size_;
  }

  /// Prepends; grows if full, like push_back.
  void push_front(T&& value) {
    if (size_ == capacity_) {
      grow();
    }
    std::size_t front = head_ == 0 ? capacity_ - 1 : head_ - 1;
    std::construct_at(slots_ + front, std::move(value));
    head_ = front;
    ++size_;
  }

  /// The first value. Precondition: !empty().
  T& front() noexcept { return slots_[head_]; }

  /// Removes the first value. Precondition: !empty().
  void pop_front() noexcept {
    std::destroy_at(slots_ + head_);
    --size_;
    head_ = size_ == 0 || head_ + 1 == capacity_ ? 0 : head_ + 1;
  }

  /// Moves the first value into `out` and removes it. Precondition: !empty().
  void pop_front_into(std::optional<T>& out) noexcept {
    out.emplace(std::move(front()));
    pop_front();
  }

  /// Calls `visit` with each value, oldest first.
  template <class Visit>
  void for_each(Visit&& visit) {
    for (std::size_t i = 0; i < size_; ++i) {
      visit(slots_[wrap(head_ + i)]);
    }
  }

  /// Destroys every value, oldest first.
  void clear() noexcept {
    while (size_ != 0) {
      std::destroy_at(slots_ + head_);
      head_ = head_ + 1 == capacity_ ? 0 : head_ + 1;
      --size_;
    }
    head_ = 0;
  }

 private:
  std::size_t wrap(std::size_t index) const noexcept { return index >= capacity_ ? index - capacity_ : index; }

  void grow() {
    std::size_t bigger = capacity_ < 8 ? 8 : capacity_ * 2;
    T* fresh = std::allocator<T>().allocate(bigger);
    for (std::size_t i = 0; i < size_; ++i) {
      T& from = slots_[wrap(head_ + i)];
      std::construct_at(fresh + i, std::move(from));
      std::destroy_at(&from);
    }
    release_storage();
    slots_ = fresh;
    capacity_ = bigger;
    owned_ = true;
    head_ = 0;
  }

  void release_storage() noexcept {
    if (owned_) {
      std::allocator<T>().deallocate(slots_, capacity_);
    }
  }

  T* slots_;
  std::size_t capacity_;
  std::size_t head_ = 0;
  std::size_t size_ = 0;
  bool owned_ = false;
};

}  // namespace corio::detail
