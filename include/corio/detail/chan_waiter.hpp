#pragma once
// The waiter protocol of select: one coroutine parked on several channels' waiter lists at once (one
// node per branch), exactly one branch winning, and values handed straight into the parked frame. A
// plain recv or send parks one node with no decision word (chan_op.hpp); both kinds of node share the
// channels' lists, and node_list::claim_first tells them apart.
//
// Design note.
// Purpose: extend the sync primitives' waiter (wait_list.hpp) where it does not fit channels. There,
//   one node sits on one list whose lock decides its state, the head waiter always accepts, and a
//   grant given to a waiter that was then cancelled is given back. Here (Go's sudog + selectDone):
//   - a coroutine parks one `chan_node` per branch, each on its own channel's list under that
//     channel's lock, and all of them share one atomic *decision word* in the `chan_waiter`;
//   - a waker (a sender finding a parked receiver, a receiver finding a parked sender, close, the
//     select's timer, the task's stop callback) must *claim* the decision (a CAS from "undecided" to
//     its branch) before it touches the node; a waker that loses the CAS skips the node (and unlinks
//     it, so the next waker does not look at it again);
//   - the winning waker moves the value into the parked frame (a recv node's optional<T>) or out of
//     it (a send node's T) under the channel's lock, so nothing is ever "in flight" outside a frame
//     or a buffer.
// The decision word: (winner << 1) | armed. winner 0 is undecided; branch b is b + 1; `cancelled_code`
//   is the stop callback's (or a frame destruction's). armed is set by the parking coroutine once it
//   has registered everything:
//     undecided,!armed --claim--> decided,!armed : the parker sees it when it arms, does not suspend
//     undecided,!armed --arm----> undecided,armed
//     undecided,armed  --claim--> decided,armed  : the claimer wakes the coroutine
//   Only a claim that finds `armed` schedules, so the coroutine is resumed exactly once, and never
//   while its await_suspend still runs.
// Registration (suspend), Go's two passes: lock every branch's channel (sorted by lock address, so two
//   selects cannot deadlock; a channel named twice is locked once); pass 1 polls the branches (in a
//   random order, or in order for select_biased) and completes the first that can complete now,
//   without parking anything; else a default branch wins; else pass 2 links every node. Then unlock,
//   register the stop callback, arm the timer, and set `armed`. Nobody can claim the decision during
//   the passes: no node is visible yet, and the stop callback and the timer come after. So pass 1
//   never needs to undo anything.
// Invariants:
//  - a node is linked iff `linked_`; both change only under its channel's lock;
//  - a node whose waiter is decided is never given a value (the claim comes first), so a losing branch
//    never consumes a message or takes a slot;
//  - a waker claims under the channel's lock and, if it found `armed`, marks the coroutine `in_hand_`
//    under that lock and clears it after scheduling (release), exactly as in wait_list.hpp; the
//    resumed coroutine (or its destructor) waits (acquire) for that before its frame may go. The stop
//    callback and the timer schedule directly: ~stop_callback and timer::disarm wait for them;
//  - after resuming, the coroutine unlocks nothing it did not lock, reads its winner's node only
//    after synchronising with the claimer (the claimer's schedule released it; or, if the claim came
//    while it was still registering, it takes that channel's lock), and unlinks its other nodes under
//    their locks before returning.
// Outcome, decided when the coroutine resumes: if its task's stop was requested by then,
//   - a recv branch that won a value gives it back to the channel: to the oldest parked receiver, or
//     to the front of the buffer (channel_state.hpp), then throws corio::cancelled: never dropped;
//     if a receiver was already told the channel is closed and drained, the branch keeps its value
//     and wins (nothing may appear after that); the next suspension point sees the stop;
//   - a send branch that delivered reports success: a delivered value (rendezvous or buffered) cannot
//     be taken back; cancellation is seen at the next suspension point;
//   - anything else (a closed branch, the timer, default, or the stop callback itself) throws
//     corio::cancelled.
// A frame destroyed while parked (or woken and queued, or queued by the budget yield), in the
//   destructor:
//   1. remove the stop callback (waits for one in flight) and disarm the timer (waits for its
//      callback);
//   2. claim the decision for `cancelled_code`, so no waker will touch a node from now on;
//   3. unlink every node under its channel's lock (which also orders us after any claimer);
//   4. wait until no waker holds the coroutine (`in_hand_` clear);
//   5. if a recv branch had won a value, give it back as above (on a closed channel it is destroyed
//      with the frame, as a buffered value is with the channel). The channels must outlive the frame
//      (the handle it awaited on holds them).
// Threads: claim() on any thread; everything else on the coroutine's own thread.
// Memory order: claim is an acq_rel CAS and arm an acq_rel fetch_or on the decision word; the value
//   and `ok_` are written under the channel's lock, whose unlock (release) is acquired by the parker
//   through the executor's schedule (post/push) or by its taking the lock; `in_hand_` as in
//   wait_list.hpp.
// Rejected alternatives:
//  - select on when_any: a frame and a stop callback per branch, and a losing branch that already
//    received a value would lose it;
//  - claiming lazily per branch while registering (lock one channel at a time): a branch found ready
//    in pass 2 must claim both its own decision and its counterpart's, and if the second claim fails
//    the first cannot be undone safely (a waker may have skipped and unlinked a node meanwhile);
//  - the wait_list waiter with a per-list state byte: a select's nodes sit on lists with different
//    locks, so no one lock can decide the outcome.
#include <atomic>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <optional>

#include <corio/detail/executor.hpp>
#include <corio/detail/stop_state.hpp>
#include <corio/detail/timer_queue.hpp>
#include <corio/detail/wait_list.hpp>

namespace corio::detail {

class chan_waiter;
struct chan_node;

/// How a channel serves one kind of branch (recv, or send, on some channel_state<T>).
struct chan_branch_ops {
  /// The channel's lock.
  spin_lock& (*lock)(void* channel) noexcept;
  /// Lock held. Completes the operation now if it can (a value, a slot or a parked counterpart is
  /// there, or the channel is closed), writing the outcome into the node; false to wait. Counterparts
  /// it claimed go into `woken`. May throw (an unbounded buffer growing) before changing anything.
  bool (*poll)(chan_node& node, wake_batch& woken);
  /// Lock held. Appends the node to the channel's waiters for its kind.
  void (*link)(chan_node& node) noexcept;
  /// Lock held. Removes the node if it is linked.
  void (*unlink)(chan_node& node) noexcept;
  /// Lock not held; null for sends. The node won a value it will not consume: hand it back. False
  /// once a receiver was told the channel is closed and drained: the node keeps the value
  /// (channel_state::give_back).
  bool (*give_back)(chan_node& node) noexcept;
};

/// One branch of a parked coroutine, on one channel's list. Lives in the awaiter (the frame).
struct chan_node {
  chan_node(void* channel, const chan_branch_ops& ops, void* value, std::uint32_t branch) noexcept
      : channel_(channel), ops_(&ops), value_(value), branch_(branch) {}
  chan_node(const chan_node&) = delete;
  chan_node& operator=(const chan_node&) = delete;

  chan_node* prev_ = nullptr;  // links: guarded by the channel's lock
  chan_node* next_ = nullptr;
  void* channel_;
  const chan_branch_ops* ops_;
  void* value_;  // send: the caller's T, moved from on delivery; recv: the std::optional<T> to fill
  parked_coroutine* parked_ = nullptr;  // the chan_waiter (in_select_) or the chan_op it belongs to
  std::uint32_t branch_;
  bool in_select_ = false;  // a select's node: a waker must claim the shared decision first
  bool linked_ = false;  // guarded by the channel's lock
  bool ok_ = false;      // outcome, written by whoever completed it: delivered / received (false: closed)
};

/// An intrusive FIFO of parked nodes of one kind on one channel. Lock held for every member.
class node_list {
 public:
  bool empty() const noexcept { return head_ == nullptr; }
  void push_back(chan_node& node) noexcept;
  void remove(chan_node& node) noexcept;
  void remove_if_linked(chan_node& node) noexcept {
    if (node.linked_) {
      remove(node);
    }
  }
  /// The oldest node whose waiter this call claimed, unlinked; nodes of waiters already decided
  /// elsewhere are unlinked on the way. A claimed waiter that is parked goes into `woken`. Null if no
  /// node could be claimed. The caller then completes the node (its value and ok_). A plain op's node
  /// is claimed by unlinking it (the lock decides); only a select's node needs a claim on its word.
  chan_node* claim_first(wake_batch& woken) noexcept {
    chan_node* node = head_;
    if (node == nullptr) {
      return nullptr;
    }
    if (node->in_select_) {
      return claim_first_select(woken);
    }
    remove(*node);
    woken.push(*node->parked_);
    return node;
  }

 private:
  chan_node* claim_first_select(wake_batch& woken) noexcept;

  chan_node* head_ = nullptr;
  chan_node* tail_ = nullptr;
};

/// The timer of a select's timeout branch; lives in the select's awaiter.
class chan_timer : public timer {
 public:
  explicit chan_timer(timer::clock::time_point deadline) noexcept : timer(deadline, &on_fire) {}

 private:
  friend class chan_waiter;
  static void on_fire(timer& t) noexcept;
  chan_waiter* waiter_ = nullptr;
  std::uint32_t branch_ = 0;
};

/// What a select adds to its branches: a default or a timeout branch, and the polling order.
struct select_shape {
  static constexpr std::uint32_t none = UINT32_MAX;
  std::uint32_t default_branch = none;
  std::uint32_t timeout_branch = none;
  chan_timer* timer = nullptr;
  bool biased = true;
};

/// The parked coroutine of one channel operation or one select (see the design note above).
/// Lives in the awaiter; not movable.
class chan_waiter : public parked_coroutine {
 public:
  /// Most branches a select may have.
  static constexpr std::size_t max_branches = 64;

  /// `nodes` (borrowed, `count` of them) are the channel branches.
  chan_waiter(chan_node* const* nodes, std::size_t count, const select_shape& shape) noexcept
      : nodes_(nodes), count_(count), shape_(shape) {
    for (std::size_t i = 0; i < count; ++i) {
      nodes[i]->parked_ = this;
      nodes[i]->in_select_ = true;
    }
  }
  ~chan_waiter() {
    if (suspended_) {
      abandon();
    }
  }

  /// await_suspend: completes a branch at once, or parks; returns whether the coroutine suspended
  /// (after true, touch nothing: another thread may already have resumed it).
  bool suspend(std::coroutine_handle<> self, stop_state* stop);

  /// await_resume: the winning branch's index; throws corio::cancelled (see "Outcome" above).
  std::uint32_t finish();

  enum class claim_result : std::uint8_t { lost, claimed_registering, claimed_parked };
  /// Any thread (a waker under the node's channel lock, the timer, the stop callback): makes `branch`
  /// the winner if nothing is decided yet.
  claim_result claim(std::uint32_t branch) noexcept { return claim_code(branch + 1); }

 private:
  friend class chan_timer;
  static constexpr std::uint32_t cancelled_code = 0x7fff'ffff;

  struct on_stop {
    chan_waiter* self;
    void operator()() const noexcept;
  };

  claim_result claim_code(std::uint32_t code) noexcept;
  std::uint32_t winner_code() const noexcept { return decision_.load(std::memory_order_acquire) >> 1; }
  bool complete_without_parking(std::coroutine_handle<> self, std::uint32_t code);
  bool poll_and_link(std::uint32_t& winner);
  void arm_timer();
  void unlink_nodes(std::uint32_t skip_code) noexcept;
  chan_node* node_of(std::uint32_t branch) const noexcept;
  void abandon() noexcept;

  chan_node* const* nodes_;
  std::size_t count_;
  select_shape shape_;
  stop_state* stop_ = nullptr;
  std::atomic<std::uint32_t> decision_{0};
  bool suspended_ = false;  // parked or queued; touched by the coroutine's own thread only
  bool linked_ = false;     // pass 2 ran: nodes may sit on lists
  bool parked_ = false;     // it armed before anything was decided: the claimer scheduled it
  bool timer_armed_ = false;
  std::optional<stop_callback<on_stop>> stop_callback_;
};

inline void node_list::push_back(chan_node& node) noexcept {
  node.prev_ = tail_;
  node.next_ = nullptr;
  if (tail_ != nullptr) {
    tail_->next_ = &node;
  } else {
    head_ = &node;
  }
  tail_ = &node;
  node.linked_ = true;
}

inline void node_list::remove(chan_node& node) noexcept {
  if (node.prev_ != nullptr) {
    node.prev_->next_ = node.next_;
  } else {
    head_ = node.next_;
  }
  if (node.next_ != nullptr) {
    node.next_->prev_ = node.prev_;
  } else {
    tail_ = node.prev_;
  }
  node.prev_ = nullptr;
  node.next_ = nullptr;
  node.linked_ = false;
}

}  // namespace corio::detail
