#pragma once
// The lock-free cross-thread queue behind event_loop::post.
//
// Purpose: any thread hands functors to one loop thread, FIFO per producer thread, with no lock, no
// read-modify-write on the hot path and no heap allocation per post for functors of up to 48 bytes.
//
// Shape: one unbounded single-producer/single-consumer channel per (producer thread, loop) pair.
// A channel is a linked list of fixed segments of 64-byte slots; a slot holds the functor in place
// plus one function pointer that runs and destroys it. The consumer drains every channel in turn.
// Per-producer FIFO follows from each channel being FIFO; nothing orders different producers
// (evpp's contract too).
//
// Invariants:
//  - `tail_` counts slots published by the producer; `head_` (consumer-private) counts slots consumed.
//    Slot n lives in segment n / segment_slots, at index n % segment_slots.
//  - The producer links a new segment (`next`) before it publishes the first slot in it, so the
//    consumer, which only follows `next` when it is about to read that slot, always finds it linked.
//  - Each channel has two owners, counted in `refs_`: the loop and the producer thread. The loop
//    frees a channel once the producer thread has exited and the channel is empty; a producer thread
//    that exits after the loop is gone frees it itself.
//
// Memory-ordering pairs:
//  - slot contents + `next`: written before the producer's seq_cst store of `tail_`, read after the
//    consumer's load of `tail_` (release/acquire suffices for this; seq_cst is for the next pair).
//  - parking: producer's seq_cst store of `tail_` then seq_cst load of the parker word, against the
//    loop's seq_cst store of the parker word then seq_cst loads of every `tail_` (see parker.hpp).
//  - segment recycling: the consumer releases a fully read segment into `spare_` (exchange, acq_rel);
//    the producer acquires it from there before overwriting it.
//  - registration: a producer pushes its new channel on `incoming_` (CAS, release); the consumer takes
//    the whole stack (exchange, acquire) and owns its private list from then on.
//
// Threads: push() from any thread; drain(), has_pending() and the destructor on the loop thread only.
// Destroying the queue while another thread is still inside push() is a use-after-free, as for any
// object; the loop refuses new posts (push returns false) once close() has been called.
//
// Rejected alternatives:
//  - one shared MPSC list (Vyukov): needs a node per post (allocation) and an exchange on a shared
//    cache line that every producer contends on.
//  - a bounded ring per producer: a full ring must block the producer, and two loops posting to each
//    other could then deadlock.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>
#include <utility>

namespace corio::detail {

class parker;

struct post_slot {
  /// Runs the stored functor if `run` is true, and always destroys it.
  using operation = void (*)(post_slot& slot, bool run);
  static constexpr std::size_t inline_bytes = 48;

  operation op;
  alignas(16) unsigned char storage[inline_bytes];
};

template <class F>
inline constexpr bool fits_inline_v = sizeof(F) <= post_slot::inline_bytes && alignof(F) <= 16;

template <class F>
void run_inline_functor(post_slot& slot, bool run) {
  F* functor = std::launder(reinterpret_cast<F*>(slot.storage));
  struct destroy_on_exit {
    F* functor;
    ~destroy_on_exit() { functor->~F(); }
  } guard{functor};
  if (run) {
    (*functor)();
  }
}

template <class F>
void run_boxed_functor(post_slot& slot, bool run) {
  F* functor = *std::launder(reinterpret_cast<F**>(slot.storage));
  struct delete_on_exit {
    F* functor;
    ~delete_on_exit() { delete functor; }
  } guard{functor};
  if (run) {
    (*functor)();
  }
}

struct post_segment {
  static constexpr std::size_t slots_per_segment = 256;
  post_slot slots[slots_per_segment];
  post_segment* next = nullptr;
};

class post_channel {
 public:
  explicit post_channel(std::uint64_t queue_id);
  ~post_channel();
  post_channel(const post_channel&) = delete;
  post_channel& operator=(const post_channel&) = delete;

  // ---- producer side ----
  template <class F>
  void push(F&& functor) {
    using stored = std::decay_t<F>;
    post_slot& slot = claim_slot();
    if constexpr (fits_inline_v<stored>) {
      ::new (static_cast<void*>(slot.storage)) stored(std::forward<F>(functor));
      slot.op = &run_inline_functor<stored>;
    } else {
      ::new (static_cast<void*>(slot.storage)) stored*(new stored(std::forward<F>(functor)));
      slot.op = &run_boxed_functor<stored>;
    }
    tail_.store(++producer_tail_, std::memory_order_seq_cst);
  }

  // ---- consumer side ----
  bool has_pending() const noexcept { return tail_.load(std::memory_order_seq_cst) != head_; }
  /// Runs up to `budget` functors; returns how many ran. A throwing functor is destroyed, counted as
  /// consumed, and its exception propagates.
  std::size_t drain(std::size_t budget);
  /// Destroys every pending functor without running it.
  void discard() noexcept;

  // ---- ownership ----
  std::uint64_t queue_id() const noexcept { return queue_id_; }
  bool owner_gone() const noexcept { return queue_gone_.load(std::memory_order_acquire); }
  /// True once the producer thread has dropped its reference (only the queue holds the channel).
  bool producer_gone() const noexcept { return refs_.load(std::memory_order_acquire) == 1; }
  void mark_queue_gone() noexcept { queue_gone_.store(true, std::memory_order_release); }
  /// Drops one of the two references; frees the channel when it was the last.
  void release() noexcept;

  post_channel* next_ = nullptr;  // link in the registration stack, then in the consumer's list

 private:
  post_slot& claim_slot();
  post_slot& consume_slot() noexcept;

  // Producer-private.
  post_segment* producer_segment_;
  std::uint64_t producer_tail_ = 0;

  alignas(64) std::atomic<std::uint64_t> tail_{0};

  // Consumer-private.
  alignas(64) post_segment* consumer_segment_;
  std::uint64_t head_ = 0;

  alignas(64) std::atomic<post_segment*> spare_{nullptr};
  std::atomic<int> refs_{2};
  std::atomic<bool> queue_gone_{false};
  const std::uint64_t queue_id_;
};

/// The calling thread's most recently used channel, so a producer posting repeatedly to one loop
/// finds its channel with one compare. Queue ids are never reused, so a stale entry cannot match.
struct last_channel_cache {
  std::uint64_t queue_id;
  post_channel* channel;
};
extern thread_local constinit last_channel_cache last_channel;

class post_queue {
 public:
  explicit post_queue(parker& consumer_parker);
  ~post_queue();
  post_queue(const post_queue&) = delete;
  post_queue& operator=(const post_queue&) = delete;

  /// Any thread. Returns false (and does not take `functor`) once close() has been called.
  template <class F>
  bool push(F&& functor) {
    if (closed_.load(std::memory_order_relaxed)) {
      return false;
    }
    channel_for_this_thread().push(std::forward<F>(functor));
    wake_consumer();
    return true;
  }

  /// Any thread: refuse further pushes.
  void close() noexcept { closed_.store(true, std::memory_order_seq_cst); }
  bool closed() const noexcept { return closed_.load(std::memory_order_relaxed); }

  /// Loop thread: runs up to `budget` functors over all channels; returns how many ran.
  std::size_t drain(std::size_t budget);
  /// Loop thread: whether any functor is waiting (seq_cst loads, for the parking protocol).
  bool has_pending() noexcept;

 private:
  post_channel& channel_for_this_thread() {
    return last_channel.queue_id == id_ ? *last_channel.channel : find_or_register_channel();
  }
  post_channel& find_or_register_channel();
  void wake_consumer() noexcept;
  void adopt_incoming() noexcept;
  void free_abandoned_channels() noexcept;

  parker& consumer_parker_;
  const std::uint64_t id_;
  std::atomic<bool> closed_{false};
  std::atomic<post_channel*> incoming_{nullptr};
  post_channel* channels_ = nullptr;  // consumer-private list
};

}  // namespace corio::detail
