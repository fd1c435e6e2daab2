#pragma once
// The lock-free cross-thread queue behind event_loop::post.
//
// Purpose: any thread hands functors to one loop thread, FIFO per producer thread, with no lock, no
// read-modify-write on the hot path and no heap allocation per post for functors of up to 64 bytes.
//
// Shape: one unbounded single-producer/single-consumer channel per (producer thread, loop) pair.
// A channel is a linked list of 16 KiB segments holding variable-size records: an operation pointer
// that runs and destroys the functor, then the functor itself, 8-byte aligned. A pointer-sized lambda
// takes 16 bytes, four to a cache line, which keeps the memory a backlog touches small. The consumer
// drains every channel in turn, each with an equal share of the round's budget first, starting one
// channel further along each round (so no producer can starve another).
// Per-producer FIFO follows from each channel being FIFO; nothing orders different producers
// (evpp's contract too).
//
// Invariants:
//  - `tail_` counts records published by the producer; `head_` (consumer-private) counts records
//    consumed. Both sides walk the same sequence of records, each knowing its own offset.
//  - A record never straddles segments. When one does not fit, the producer writes a null operation
//    (if there is room for one) and continues at offset 0 of a new segment, which it links (`next`)
//    before publishing the record in it; so the consumer, which only moves on when it is about to read
//    a published record, always finds the null marker (or the segment's end) and the link.
//  - Each channel has two owners, counted in `refs_`: the loop and the producer thread. The loop
//    frees a channel once the producer thread has exited and the channel is empty; a producer thread
//    that exits after the loop is gone frees it itself.
//
// Memory-ordering pairs:
//  - record contents, markers + `next`: written before the producer's seq_cst store of `tail_`, read
//    after the consumer's load of `tail_` (release/acquire suffices for this; seq_cst is for the next
//    pair).
//  - parking: producer's seq_cst store of `tail_` then seq_cst load of the parker word, against the
//    loop's seq_cst store of the parker word then seq_cst loads of every `tail_` (see parker.hpp).
//  - segment recycling: the consumer pushes a fully read segment onto the `recycled_` stack (CAS,
//    release); the producer takes the whole stack at once (exchange, acquire) into its private free
//    list before it reuses any of them. Taking everything at once makes the stack immune to ABA.
//    `free_segments_` counts segments in the stack plus the producer's list, so at most
//    `max_free_segments` (4 MiB) are kept per channel; the rest go back to the allocator.
//  - registration: a producer pushes its new channel on `incoming_` (CAS, release); the consumer takes
//    the whole stack (exchange, acquire) and owns its private list from then on.
//  - stopping (post_queue::settle): a push that returned true must run before run() returns after
//    stop(), but a producer could pass the `closed_` check, stop() and run()'s last drain could follow,
//    and only then would the record be published: accepted and never run. So a push is bracketed by
//    its channel's `pushing_` flag, set before it checks `closed_`, cleared (release) once the record
//    is published. settle(), after `closed_` is seen, waits until no channel is pushing; from then on
//    no record can arrive, so the drain after it is the last. The flag's store and the `closed_` load
//    need a StoreLoad barrier against settle's (`closed_` seen, then the flags loaded): a Dekker pair.
//    The producer's side is a plain store and a compiler barrier, and settle's is membarrier(2),
//    which runs a full barrier on every thread of the process, so a post pays no fence for it (if
//    membarrier fails after all, an mprotect that interrupts the same CPUs stands in for it). Where
//    membarrier is not available the producer sets the flag with a seq_cst exchange and loads
//    `closed_` seq_cst, and settle loads the flags seq_cst after its seq_cst load of `closed_`: in the
//    single order of seq_cst operations a producer that read `closed_` false set its flag before the
//    close, so settle sees it. (No fences: ThreadSanitizer does not model them.) A channel registered
//    after settle took `incoming_` reads `closed_` after its CAS, which comes after that exchange: it
//    sees the close. Cost, measured against the queue without the flag (post_bench, 15-25
//    alternating runs): 0.95-0.98x the posts/s at two producers, 1.06-1.08x at four (one producer
//    is bimodal in both). With the flag on tail_'s line it was 0.92-0.94x; with the closed check
//    ahead of the cached channel's look-up (it now guards only a registration), 0.84-0.91x.
//
// Threads: push() from any thread; drain(), has_pending(), settle() and the destructor on the loop
// thread only. Destroying the queue while another thread may still call push() is a use-after-free,
// as for any object; the loop refuses new posts (push returns false) once close() has been called, and
// the destructor settles first, so a push that passed its check before the close is finished (and its
// functor destroyed unrun) rather than cut short.
//
// Rejected alternatives:
//  - one shared MPSC list (Vyukov): needs a node per post (allocation) and an exchange on a shared
//    cache line that every producer contends on.
//  - a bounded ring per producer: a full ring must block the producer, and two loops posting to each
//    other could then deadlock.
//  - fixed 64-byte slots (the first version): simpler, but a backlog of small lambdas touched four
//    times the memory, and page faults dominated the profile under load.
//  - an asymmetric barrier for parking too (a compiler barrier per post, membarrier(2) when the loop
//    parks) instead of the seq_cst store: tried and measured, medians of 9 interleaved runs showed no
//    gain at P=1 or P=4 on the 2-core lab machine, so the simpler protocol stayed. (Stopping uses one:
//    a loop stops once, it parks all the time.)
//  - a seq_cst fence per post for the stopping pair: a second full barrier on every post's path, for
//    an event that happens once per loop.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

#include <corio/detail/parker.hpp>

namespace corio::detail {

/// One posted functor, stored in place in a segment: the record is the operation pointer followed by
/// the functor (or, for a large or over-aligned functor, a pointer to a heap copy). Records are
/// 8-byte aligned and as long as they need to be, so small lambdas pack several to a cache line.
struct post_record {
  /// Stores the record's size in `record_bytes` first, then runs the functor if `run` is true, and
  /// always destroys it (also when it throws).
  using operation = void (*)(void* storage, bool run, std::size_t& record_bytes);
  operation op;  // null: the rest of this segment is unused, continue in the next one
};

inline constexpr std::size_t post_record_align = alignof(post_record);
inline constexpr std::size_t max_inline_functor = 64;

template <class F>
inline constexpr bool fits_inline_v = sizeof(F) <= max_inline_functor && alignof(F) <= post_record_align;

constexpr std::size_t round_to_record_align(std::size_t bytes) {
  return (bytes + post_record_align - 1) / post_record_align * post_record_align;
}

template <class F>
inline constexpr std::size_t record_bytes_v =
    sizeof(post_record) + round_to_record_align(fits_inline_v<F> ? sizeof(F) : sizeof(F*));

template <class F>
void run_inline_functor(void* storage, bool run, std::size_t& record_bytes) {
  record_bytes = record_bytes_v<F>;
  F* functor = std::launder(static_cast<F*>(storage));
  struct destroy_on_exit {
    F* functor;
    ~destroy_on_exit() { functor->~F(); }
  } guard{functor};
  if (run) {
    (*functor)();
  }
}

template <class F>
void run_boxed_functor(void* storage, bool run, std::size_t& record_bytes) {
  record_bytes = record_bytes_v<F>;
  F* functor = *std::launder(static_cast<F**>(storage));
  struct delete_on_exit {
    F* functor;
    ~delete_on_exit() { delete functor; }
  } guard{functor};
  if (run) {
    (*functor)();
  }
}

/// This thread is inside a push to the same queue (a functor's copy or move constructor posts): its
/// record would be published before the outer one is written, and the flag cleared under it. Throws
/// std::logic_error. Out of line, so the push it guards stays small enough to inline.
[[noreturn, gnu::cold, gnu::noinline]] void throw_nested_post();

/// Whether membarrier(2) is registered for the process (see "stopping" above), registering it on the
/// first call: each queue asks once, when it is made, before any push can read its answer.
bool membarrier_registered() noexcept;

struct post_segment {
  static constexpr std::size_t bytes = 16 * 1024 - 64;
  alignas(64) unsigned char data[bytes];
  post_segment* next = nullptr;
};

class post_channel {
 public:
  post_channel(std::uint64_t queue_id, std::shared_ptr<parker> consumer);
  ~post_channel();
  post_channel(const post_channel&) = delete;
  post_channel& operator=(const post_channel&) = delete;

  // ---- producer side ----
  template <class F>
  void push(F&& functor) {
    using stored = std::decay_t<F>;
    static_assert(record_bytes_v<stored> <= post_segment::bytes);
    unsigned char* record = claim(record_bytes_v<stored>);
    void* storage = record + sizeof(post_record);
    try {
      if constexpr (fits_inline_v<stored>) {
        ::new (storage) stored(std::forward<F>(functor));
        ::new (record) post_record{&run_inline_functor<stored>};
      } else {
        ::new (storage) stored*(new stored(std::forward<F>(functor)));
        ::new (record) post_record{&run_boxed_functor<stored>};
      }
    } catch (...) {
      unclaim(record);  // the functor's copy or move threw (or its box could not be allocated)
      throw;
    }
    tail_.store(++producer_tail_, std::memory_order_seq_cst);
  }
  /// Brackets a push, closed check included (see "stopping"): ordered before the `closed_` load that
  /// follows, by membarrier on the loop's side, or else by being a seq_cst operation.
  void begin_push(bool asymmetric) noexcept {
    if (asymmetric) {
      pushing_.store(true, std::memory_order_relaxed);
      std::atomic_signal_fence(std::memory_order_seq_cst);
    } else {
      pushing_.exchange(true, std::memory_order_seq_cst);
    }
  }
  void end_push() noexcept { pushing_.store(false, std::memory_order_release); }
  /// Producer: whether this thread is inside a push on this channel (only it sets the flag).
  bool pushing_here() const noexcept { return pushing_.load(std::memory_order_relaxed); }
  /// After a push: wakes the consumer if it is parked. The parker is shared, so this stays valid
  /// even if the consumer's loop was destroyed right after it ran what was just pushed.
  void wake_consumer() noexcept { consumer_->unpark_if_parked(); }

  // ---- consumer side ----
  bool has_pending() const noexcept { return tail_.load(std::memory_order_seq_cst) != head_; }
  /// Pairs with end_push(), so what that push published is visible once this is false.
  bool push_in_progress() const noexcept { return pushing_.load(std::memory_order_seq_cst); }
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

 private:
  unsigned char* claim(std::size_t record_bytes);
  /// Gives back the space claim() just returned, unwritten and unpublished, so the next record takes it
  /// (left claimed, the consumer would read it as a record).
  void unclaim(unsigned char* record) noexcept {
    producer_offset_ = static_cast<std::size_t>(record - producer_segment_->data);
  }
  void consume_one(bool run);

  // Producer-private: a line the consumer does not read while posts flow (`pushing_` only in
  // settle()). The flag's stores are two per push, so they must not land on a line the consumer
  // polls (tail_'s) or walks (next_'s): each would pull that line back once more per push.
  const std::shared_ptr<parker> consumer_;
  post_segment* producer_segment_;
  std::size_t producer_offset_ = 0;
  std::uint64_t producer_tail_ = 0;
  post_segment* producer_free_ = nullptr;  // the producer's free list
  std::atomic<bool> pushing_{false};

  alignas(64) std::atomic<std::uint64_t> tail_{0};

 public:
  /// Link in the registration stack, then in the consumer's list (the consumer's line).
  alignas(64) post_channel* next_ = nullptr;

 private:
  // Consumer-private.
  post_segment* consumer_segment_;
  std::size_t consumer_offset_ = 0;
  std::uint64_t head_ = 0;

  static constexpr std::size_t max_free_segments = 256;
  post_segment* take_free_segment();
  void recycle(post_segment* segment) noexcept;

  alignas(64) std::atomic<post_segment*> recycled_{nullptr};
  std::atomic<std::size_t> free_segments_{0};
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
  /// `consumer_parker` is shared with every channel, so a producer still inside push() after the loop
  /// was destroyed (it already ran the functor) wakes a parker that is still there.
  explicit post_queue(std::shared_ptr<parker> consumer_parker);
  ~post_queue();
  post_queue(const post_queue&) = delete;
  post_queue& operator=(const post_queue&) = delete;

  /// Any thread. Returns false (and does not take `functor`) once close() has been called.
  template <class F>
  bool push(F&& functor) {
    if (last_channel.queue_id == id_) [[likely]] {
      return push_into(*last_channel.channel, std::forward<F>(functor));  // this thread's channel, cached
    }
    return push_looking_up(std::forward<F>(functor));
  }

  /// Any thread: refuse further pushes.
  void close() noexcept { closed_.store(true, std::memory_order_seq_cst); }
  /// Seq_cst: the loop reads this after prepare_park() (a store-buffering pair with close() then
  /// unpark_if_parked() in stop()), so on any CPU either the loop sees the close or stop() sees it parked.
  bool closed() const noexcept { return closed_.load(std::memory_order_seq_cst); }

  /// Loop thread, once closed() is true: waits until no push is in progress, so every push that
  /// returned (or will return) true is visible to the next drain, and no record arrives after it.
  void settle() noexcept;

  /// Loop thread: runs up to `budget` functors over all channels; returns how many ran.
  std::size_t drain(std::size_t budget);
  /// Once closed, on the thread destroying the loop: waits for pushes in progress (settle) and
  /// destroys every functor still waiting, unrun.
  void discard() noexcept;
  /// Loop thread: whether any functor is waiting (seq_cst loads, for the parking protocol).
  bool has_pending() noexcept;

 private:
  /// push() when the cache names another queue: finds or registers this thread's channel (not once
  /// closed), or uses a one-off channel once the thread's list of channels was destroyed (a post from
  /// a thread_local's destructor at thread exit).
  template <class F>
  bool push_looking_up(F&& functor) {
    if (closed_.load(std::memory_order_relaxed)) {
      return false;  // refused without registering a channel
    }
    post_channel* channel = find_or_register_channel();
    if (channel == nullptr) [[unlikely]] {
      one_off_channel once(*this);
      return push_into(*once.channel, std::forward<F>(functor));
    }
    return push_into(*channel, std::forward<F>(functor));
  }
  template <class F>
  bool push_into(post_channel& channel, F&& functor) {
    if (channel.pushing_here()) [[unlikely]] {
      throw_nested_post();
    }
    struct push_bracket {
      post_channel& channel;
      ~push_bracket() { channel.end_push(); }
    } bracket{channel};
    channel.begin_push(asymmetric_);
    if (closed_.load(std::memory_order_seq_cst)) {
      return false;  // closed since the first look: settle() may already have passed this channel
    }
    channel.push(std::forward<F>(functor));
    channel.wake_consumer();  // touches only the channel (kept alive by this thread) and the parker
    return true;
  }
  post_channel* find_or_register_channel();
  /// A new channel, handed to the consumer through `incoming_`; the caller holds its producer reference.
  post_channel* register_channel();
  /// A channel for one push from a thread that has no list of channels left: registered, then let go
  /// of (the consumer drains it and frees it, as it does an exited producer's).
  struct one_off_channel {
    explicit one_off_channel(post_queue& queue) : channel(queue.register_channel()) {}
    ~one_off_channel() { channel->release(); }
    one_off_channel(const one_off_channel&) = delete;
    one_off_channel& operator=(const one_off_channel&) = delete;
    post_channel* channel;
  };
  void adopt_incoming() noexcept;
  void free_abandoned_channels() noexcept;

  const std::shared_ptr<parker> consumer_parker_;
  const std::uint64_t id_;
  const bool asymmetric_;  // membarrier_registered(), kept on the line every push reads
  std::atomic<bool> closed_{false};
  std::atomic<post_channel*> incoming_{nullptr};
  // Consumer-private, written every drain: off the line every push reads (`id_`, `closed_`).
  alignas(64) post_channel* channels_ = nullptr;  // consumer-private list
  std::size_t rotation_ = 0;          // consumer-private: which channel a round serves first
};

}  // namespace corio::detail
