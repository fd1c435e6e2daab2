#pragma once
// detail::channel_state<T>: the shared state behind corio::channel's sender and receiver handles.
//
// Design note.
// Purpose: an MPMC FIFO of T with a capacity (0 = rendezvous, N = bounded, unbounded), close, and
//   two waiter lists (parked receivers, parked senders) holding both kinds of node: a plain op's
//   (chan_op.hpp) and a select branch's (chan_waiter.hpp).
// Structure: one allocation per channel: this object with the bounded buffer's N slots right behind
//   it (ring.hpp). One spin_lock guards the buffer, both lists and `closed_`. The handle counts are
//   atomics outside the lock.
// Invariants (under the lock; "claimable" = a linked plain op's node, or a linked select node whose
//   select is still undecided):
//  - a claimable receiver is parked only while the buffer is empty and no claimable sender is parked:
//    a sender hands its value straight into the oldest receiver's frame (no buffer round trip), and a
//    receiver that finds a parked sender takes its value instead of parking;
//  - a claimable sender is parked only while the buffer holds at least `capacity_` values; when a
//    receive makes room, the oldest parked sender's value moves into the buffer in the same critical
//    section (so FIFO order is the order in which sends were accepted);
//  - closed_ never clears. Once closed, sends fail and parked senders are woken with failure (their
//    value untouched: it still sits in their frame); receivers drain the buffer, then get nullopt;
//  - a value given back by a receiver that won it but was cancelled (or destroyed) goes to the oldest
//    parked receiver, else to the *front* of the buffer, which may then exceed `capacity_` (the ring
//    grows on this rare path; blocked senders simply stay blocked until it is below capacity again).
//    Caveats: if two receivers that won values are cancelled in the reverse of the order they won
//    them, those two values come back in that reverse order;
//  - no value appears after a receiver was told the channel is closed and drained (`end_told_`,
//    set with every closed outcome of a recv and every receiver close() wakes): give_back then
//    refuses, and the receiver that won the value keeps it. Before that, a give-back on a closed
//    channel is accepted (the next recv takes it), so a recv that lost a when_any or a timeout to a
//    close racing the last value loses nothing;
//  - every value that entered the channel is destroyed exactly once: by a receiver that took it, by
//    discard_buffered() when the last receiver goes, or by the ring when the state is destroyed.
// Lifetime: the state is reference counted by its handles (`handles_`). The last sender's drop
//   closes the channel (receivers drain, then see nullopt); the last receiver's drop closes it and
//   destroys the buffered values (no one can receive them; a value holding a sender of this very
//   channel would otherwise keep it alive forever). The last handle's drop destroys the state.
//   An operation in flight borrows its handle: the handle must outlive the co_await, like any object
//   whose member function is running. A select is the exception: it is often built ahead and kept in
//   a variable, so it holds a count of its own on each branch's channel (retain(), not a sender or
//   a receiver: closing is unchanged), and awaiting it after the handles went is safe.
// Fast path: a plain op's attempt() is one lock, the buffer or hand-off work, and (if it would block
//   and nobody can cancel the task) the link, in one critical section; see chan_op.hpp.
// Threads: every member function takes the lock itself except the *_locked ones and the branch ops
//   (chan_waiter and chan_op call those with the lock held). Nothing is resumed under the lock (wake_batch).
// Memory order: everything under the lock (acquire/release spin_lock); handle counts: fetch_add
//   relaxed (a handle is copied from a live one), fetch_sub acq_rel (the last drop sees every write
//   of the others before it destroys the state).
// Rejected: a lock-free ring (Vyukov MPMC) with a separate waiter list: it needs a second
//   synchronisation to avoid lost wake-ups between "buffer full" and "park", i.e. the lock anyway on
//   the slow path and a seq_cst fence on the fast one; the lock is one uncontended exchange here, and
//   direct hand-off means a parked receiver never touches the buffer at all.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <mutex>
#include <new>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include <corio/detail/chan_op.hpp>
#include <corio/detail/chan_waiter.hpp>
#include <corio/detail/ring.hpp>
#include <corio/detail/wait_list.hpp>

namespace corio::detail {

enum class op_status : std::uint8_t { done, would_block, closed, parked };

template <class T>
class channel_state {
  static_assert(std::is_object_v<T> && !std::is_const_v<T> && !std::is_array_v<T>,
                "corio::channel<T>: T must be a non-const object type");
  static_assert(std::is_nothrow_move_constructible_v<T>,
                "corio::channel<T>: T must be nothrow move constructible (values move under a lock)");

 public:
  static constexpr std::size_t unbounded = std::numeric_limits<std::size_t>::max();

  /// One allocation: the state and, for a bounded channel, its `capacity` slots. Throws
  /// std::length_error for an impossible capacity, std::bad_alloc when out of memory.
  static channel_state* create(std::size_t capacity) {
    std::size_t slots = capacity == unbounded ? 0 : capacity;
    if (slots > (std::numeric_limits<std::size_t>::max() - header_size) / sizeof(T)) {
      throw std::length_error("corio::channel: capacity too large");
    }
    void* memory = ::operator new(header_size + slots * sizeof(T), std::align_val_t(alignment));
    T* lent = slots != 0 ? reinterpret_cast<T*>(static_cast<unsigned char*>(memory) + header_size) : nullptr;
    return ::new (memory) channel_state(lent, capacity);
  }

  channel_state(const channel_state&) = delete;
  channel_state& operator=(const channel_state&) = delete;

  /// Keeps the state allocated without being a sender or a receiver (a select), until drop_retained().
  void retain() noexcept { handles_.fetch_add(1, std::memory_order_relaxed); }
  void drop_retained() noexcept { release(); }
  void add_sender() noexcept {
    senders_.fetch_add(1, std::memory_order_relaxed);
    handles_.fetch_add(1, std::memory_order_relaxed);
  }
  void add_receiver() noexcept {
    receivers_.fetch_add(1, std::memory_order_relaxed);
    handles_.fetch_add(1, std::memory_order_relaxed);
  }
  void drop_sender() noexcept {
    if (senders_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      close();
    }
    release();
  }
  void drop_receiver() noexcept {
    if (receivers_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      close();
      discard_buffered();
    }
    release();
  }

  /// Moves from `value` only if it returns done.
  op_status try_send(T& value) {
    wake_batch woken;
    std::lock_guard guard(lock_);
    return send_locked(value, woken);
  }
  op_status try_recv(std::optional<T>& out) noexcept {
    wake_batch woken;
    std::lock_guard guard(lock_);
    return recv_locked(out, woken);
  }

  /// A plain op's first attempt (chan_op.hpp): completes `node` now if it can (done or closed, the
  /// outcome also in node.ok_); else links it and returns parked if `op` may link at once, or returns
  /// would_block. Only an unbounded send may throw (growing), before changing anything.
  /// The hot path of every plain op, hence flatten: g++ stops inlining the buffer operations into it
  /// once they have a few callers, which costs a call and a second prologue per op (callgrind).
  template <bool Receiving>
  [[gnu::flatten]] op_status attempt(chan_node& node, chan_op& op) {
    wake_batch woken;
    std::lock_guard guard(lock_);
    op_status status = Receiving ? recv_locked(slot_of(node), woken) : send_locked(source_of(node), woken);
    if (status == op_status::would_block && op.may_link_at_once()) {
      op.linking();
      (Receiving ? parked_receivers_ : parked_senders_).push_back(node);
      return op_status::parked;  // the guard unlocks after this: from then on, touch nothing
    }
    node.ok_ = status == op_status::done;
    return status;
  }

  /// Closes the channel and wakes every parked sender (failed) and receiver (nullopt). False if it was
  /// already closed.
  bool close() noexcept {
    wake_batch woken;
    std::lock_guard guard(lock_);
    if (closed_) {
      return false;
    }
    closed_ = true;
    while (chan_node* receiver = parked_receivers_.claim_first(woken)) {
      receiver->ok_ = false;  // parked receivers imply an empty buffer: closed and drained
      end_told_ = true;
    }
    while (chan_node* sender = parked_senders_.claim_first(woken)) {
      sender->ok_ = false;  // its value was never touched
    }
    return true;
  }

  bool closed() noexcept {
    std::lock_guard guard(lock_);
    return closed_;
  }
  std::size_t size() noexcept {
    std::lock_guard guard(lock_);
    return buffer_.size();
  }
  std::size_t capacity() const noexcept { return capacity_; }

  /// A value a receiver won but will not consume: to the oldest parked receiver, else to the front.
  /// Refused (false, `value` untouched) once a receiver was told the channel is closed and drained:
  /// nothing may appear after that, so the receiver that won the value keeps it. Growing the buffer
  /// here can only fail when memory is exhausted, which terminates.
  bool give_back(T& value) noexcept {
    wake_batch woken;
    std::lock_guard guard(lock_);
    if (end_told_) {
      return false;
    }
    if (chan_node* receiver = parked_receivers_.claim_first(woken)) {
      slot_of(*receiver).emplace(std::move(value));
      receiver->ok_ = true;
      return true;
    }
    buffer_.push_front(std::move(value));
    return true;
  }

 private:
  static constexpr std::size_t alignment = std::max(alignof(channel_state), alignof(T));
  static constexpr std::size_t header_size = (sizeof(channel_state) + alignof(T) - 1) / alignof(T) * alignof(T);

  channel_state(T* slots, std::size_t capacity) noexcept
      : buffer_(slots, capacity == unbounded ? 0 : capacity), capacity_(capacity) {}
  ~channel_state() = default;

  void release() noexcept {
    if (handles_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      this->~channel_state();
      ::operator delete(static_cast<void*>(this), std::align_val_t(alignment));
    }
  }

  // Destroys buffered values one at a time, outside the lock (a value's destructor may use channels).
  void discard_buffered() noexcept {
    for (;;) {
      std::optional<T> victim;
      {
        std::lock_guard guard(lock_);
        if (buffer_.empty()) {
          return;
        }
        buffer_.pop_front_into(victim);
      }
    }
  }

  static T& source_of(chan_node& node) noexcept { return *static_cast<T*>(node.value_); }
  static std::optional<T>& slot_of(chan_node& node) noexcept { return *static_cast<std::optional<T>*>(node.value_); }

  // Lock held. Moves from `value` only when it returns done.
  op_status send_locked(T& value, wake_batch& woken) {
    if (closed_) {
      return op_status::closed;
    }
    if (chan_node* receiver = parked_receivers_.claim_first(woken)) {
      slot_of(*receiver).emplace(std::move(value));  // straight into the parked frame
      receiver->ok_ = true;
      return op_status::done;
    }
    if (buffer_.size() < capacity_) {
      buffer_.push_back(std::move(value));  // only an unbounded ring grows (and may throw) here
      return op_status::done;
    }
    return op_status::would_block;
  }

  // Lock held.
  op_status recv_locked(std::optional<T>& out, wake_batch& woken) noexcept {
    if (!buffer_.empty()) {
      buffer_.pop_front_into(out);
      if (buffer_.size() < capacity_) {
        if (chan_node* sender = parked_senders_.claim_first(woken)) {
          buffer_.push_back(std::move(source_of(*sender)));  // below capacity: never grows
          sender->ok_ = true;
        }
      }
      return op_status::done;
    }
    if (chan_node* sender = parked_senders_.claim_first(woken)) {
      out.emplace(std::move(source_of(*sender)));  // rendezvous (or a sender parked past a give-back)
      sender->ok_ = true;
      return op_status::done;
    }
    if (closed_) {
      end_told_ = true;
      return op_status::closed;
    }
    return op_status::would_block;
  }

  static channel_state& of(chan_node& node) noexcept { return *static_cast<channel_state*>(node.channel_); }
  static spin_lock& lock_of(void* channel) noexcept { return static_cast<channel_state*>(channel)->lock_; }
  static bool poll_recv(chan_node& node, wake_batch& woken) {
    op_status status = of(node).recv_locked(slot_of(node), woken);
    node.ok_ = status == op_status::done;
    return status != op_status::would_block;
  }
  static bool poll_send(chan_node& node, wake_batch& woken) {
    op_status status = of(node).send_locked(source_of(node), woken);
    node.ok_ = status == op_status::done;
    return status != op_status::would_block;
  }
  static void link_recv(chan_node& node) noexcept { of(node).parked_receivers_.push_back(node); }
  static void link_send(chan_node& node) noexcept { of(node).parked_senders_.push_back(node); }
  static void unlink_recv(chan_node& node) noexcept { of(node).parked_receivers_.remove_if_linked(node); }
  static void unlink_send(chan_node& node) noexcept { of(node).parked_senders_.remove_if_linked(node); }
  static bool give_back_recv(chan_node& node) noexcept {
    std::optional<T>& slot = slot_of(node);
    if (!of(node).give_back(*slot)) {
      return false;
    }
    slot.reset();
    node.ok_ = false;
    return true;
  }

  spin_lock lock_;
  node_list parked_receivers_;  // oldest first
  node_list parked_senders_;    // oldest first
  ring<T> buffer_;
  std::size_t capacity_;
  bool closed_ = false;
  bool end_told_ = false;  // a receiver got "closed and drained": nothing may be given back after it
  std::atomic<std::size_t> handles_{2};  // one sender and one receiver at creation
  std::atomic<std::size_t> senders_{1};  // sender handles
  std::atomic<std::size_t> receivers_{1};  // receiver handles

 public:
  /// The branch tables chan_waiter drives (declared last: they name the functions above).
  static constexpr chan_branch_ops recv_ops{&lock_of, &poll_recv, &link_recv, &unlink_recv, &give_back_recv};
  static constexpr chan_branch_ops send_ops{&lock_of, &poll_send, &link_send, &unlink_send, nullptr};
};

}  // namespace corio::detail
