#pragma once
// A worker's local run queue: bounded, one producer (the owning worker), many consumers (the owner
// and thieves), FIFO. Capacity is a template parameter so tests can run it with capacity 4.
//
// Invariants:
//  - Items live in slots [head_, tail_) (indices modulo Capacity); tail_ - head_ <= Capacity.
//  - Only the owner writes tail_ and writes slots; consumers (owner included) take items by CAS on
//    head_, so each item is taken exactly once.
// Memory-ordering pairs:
//  - owner stores slot (relaxed) then tail_ (release); consumers load tail_ (acquire) then the slot.
//  - a consumer copies the slots it wants, then CASes head_ forward (acq_rel). The owner reads head_
//    (acquire) before reusing a slot, so it never overwrites a slot a consumer may still be copying
//    from before its CAS: a slot is reused only after head_ has moved past it. Slots are atomics
//    (relaxed) so the losing consumer's stale copy is not a data race; it is discarded with the CAS.
//  - parking protocol: the owner publishes tail_ with a seq_cst store and then reads the idle counters
//    seq_cst; a parking worker updates those counters and then re-reads tail_/head_ seq_cst (see
//    idle.hpp). All four are seq_cst operations, so both sides cannot miss each other. (A fence would
//    do the same, but ThreadSanitizer cannot check fences.)
//  - push_batch() writes its slots, then publishes them all with one seq_cst tail_ store: the same
//    pairs as push(), one locked instruction for the batch (a seq_cst store is an XCHG on x86: per
//    push, it was one of the three locked operations each I/O completion cost a worker).
// Threads: push(), push_batch(), pop() and pop_unshared() by the owner only (pop_unshared() only while
// no thief exists); steal_half() by any other worker; size() anyone.
// Rejected: Chase-Lev (LIFO for the owner; we want FIFO fairness plus a separate LIFO slot);
// an unbounded queue (overflow goes to the runtime's injection queue instead, as in tokio).
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace corio::detail {

template <std::size_t Capacity>
class ws_queue {
  static_assert(Capacity >= 2 && (Capacity & (Capacity - 1)) == 0, "capacity must be a power of two");

 public:
  static constexpr std::size_t capacity = Capacity;

  /// Owner only. False if full (the caller moves work to the injection queue instead).
  bool push(void* item) noexcept {
    std::uint64_t tail = tail_.load(std::memory_order_relaxed);
    if (tail - head_.load(std::memory_order_acquire) >= Capacity) {
      return false;
    }
    slots_[tail & mask].store(item, std::memory_order_relaxed);
    tail_.store(tail + 1, std::memory_order_seq_cst);
    return true;
  }

  /// Owner only: pushes items[0, count) in order while there is room, `address(item)` each, and
  /// publishes them at once. Returns how many it pushed (the caller moves the rest elsewhere).
  template <class Item, class Address>
  std::size_t push_batch(const Item* items, std::size_t count, Address address) noexcept {
    std::uint64_t tail = tail_.load(std::memory_order_relaxed);
    std::uint64_t room = Capacity - (tail - head_.load(std::memory_order_acquire));
    std::size_t pushed = count < room ? count : static_cast<std::size_t>(room);
    for (std::size_t i = 0; i < pushed; ++i) {
      slots_[(tail + i) & mask].store(address(items[i]), std::memory_order_relaxed);
    }
    if (pushed != 0) {
      tail_.store(tail + pushed, std::memory_order_seq_cst);
    }
    return pushed;
  }

  /// Owner only. The oldest item, or null.
  void* pop() noexcept {
    std::uint64_t head = head_.load(std::memory_order_acquire);
    for (;;) {
      if (head == tail_.load(std::memory_order_relaxed)) {
        return nullptr;
      }
      void* item = slots_[head & mask].load(std::memory_order_relaxed);
      if (head_.compare_exchange_weak(head, head + 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
        return item;
      }
    }
  }

  /// Owner only, and only while no other thread can take from the queue (a runtime of one worker has
  /// no thieves): pop() without the CAS. The head is published with a release store, which is all
  /// the owner's own push() and size() readers need.
  void* pop_unshared() noexcept {
    std::uint64_t head = head_.load(std::memory_order_relaxed);
    if (head == tail_.load(std::memory_order_relaxed)) {
      return nullptr;
    }
    void* item = slots_[head & mask].load(std::memory_order_relaxed);
    head_.store(head + 1, std::memory_order_release);
    return item;
  }

  /// Owner only: removes up to `max` of the oldest items into `out`; returns how many.
  std::size_t pop_batch(void** out, std::size_t max) noexcept { return take(out, max, false); }

  /// Another worker: takes half of the items (rounded up) into `out` (room for Capacity / 2 + 1).
  /// Returns how many were taken.
  std::size_t steal_half(void** out) noexcept { return take(out, Capacity / 2 + 1, true); }

  /// Any thread; a snapshot.
  std::size_t size() const noexcept {
    std::uint64_t tail = tail_.load(std::memory_order_seq_cst);
    std::uint64_t head = head_.load(std::memory_order_seq_cst);
    return tail > head ? static_cast<std::size_t>(tail - head) : 0;
  }
  bool empty() const noexcept { return size() == 0; }

 private:
  static constexpr std::uint64_t mask = Capacity - 1;

  std::size_t take(void** out, std::size_t max, bool half) noexcept {
    std::uint64_t head = head_.load(std::memory_order_acquire);
    for (;;) {
      std::uint64_t tail = tail_.load(std::memory_order_acquire);
      if (tail <= head) {
        return 0;
      }
      std::uint64_t available = tail - head;
      std::uint64_t count = half ? (available + 1) / 2 : available;
      if (count > max) {
        count = max;
      }
      for (std::uint64_t i = 0; i < count; ++i) {
        out[i] = slots_[(head + i) & mask].load(std::memory_order_relaxed);
      }
      if (head_.compare_exchange_weak(head, head + count, std::memory_order_acq_rel, std::memory_order_acquire)) {
        return static_cast<std::size_t>(count);
      }
    }
  }

  alignas(64) std::atomic<std::uint64_t> head_{0};
  alignas(64) std::atomic<std::uint64_t> tail_{0};
  alignas(64) std::array<std::atomic<void*>, Capacity> slots_{};
};

}  // namespace corio::detail
