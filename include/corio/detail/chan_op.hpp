#pragma once
// detail::chan_op: the waiter of one plain channel operation (`co_await tx.send(v)`, `co_await
// rx.recv()`), which parks one node on one channel's list and needs none of select's machinery.
//
// Design note.
// Purpose: the hot path of a channel. A select (chan_waiter.hpp) parks a node per branch on lists
//   guarded by different locks, so a shared atomic decision word has to say which branch won. A plain
//   operation has one node on one list, so that list's lock decides everything, as in wait_list.hpp:
//   a waker that unlinks the node under the lock owns it; nothing to claim, no CAS.
// The path, in the typed awaiter (channel.hpp) and channel_state<T>::attempt:
//   1. start(): record the handle and executor; a task already cancelled completes at once (throws);
//   2. under the channel's lock, complete now if possible (a value, a slot, a parked counterpart, or
//      closed); else, if nobody can cancel the task, link the node before unlocking and suspend;
//   3. otherwise park(): register the stop callback (without the lock: it may run at once), then
//      under the lock poll once more (through the channel's branch ops) and link, unless cancel()
//      ran meanwhile. Only this path pays for a stop callback, and parking is the rare case.
//   Any completion without suspending spends the cooperative budget (yield_if_budget_spent).
// States, all guarded by the channel's lock until the coroutine resumes:
//   unregistered --link--> registered,linked --waker unlinks, sets ok_--> registered,!linked (done)
//                                          \--cancel() unlinks--> cancelled
//   unregistered --cancel()--> cancelled  (park() sees it under the lock and does not link)
//   unregistered --park() completes it under the lock--> registered,!linked (cancel() finds nothing)
// Invariants:
//  - the node is linked only while `registered_` and not yet completed; a waker that finds it on the
//    list (node_list::claim_first) unlinks it, completes it (value, ok_) and marks it `in_hand_` under
//    the lock, then schedules it after unlocking (wake_batch), so it is resumed exactly once;
//  - a woken recv owns its value; if its task was cancelled by the time it resumes, the value goes
//    back to the channel (channel_state::give_back), so it is never lost, unless a receiver was
//    told the channel is closed and drained since: then the recv keeps it and returns it; a
//    delivered send stands;
//  - a recv that completes inline and finds its task's stop requested by then ends as a woken one
//    does: it gives its value back (a when_any operand that lost while it took the value inline
//    returned it into the losing slot, where when_any destroyed it); an inline send stands without
//    looking (a delivered send stands anyway); a task whose stop was requested before the op starts
//    gets corio::cancelled (step 1).
// A frame destroyed while parked (or woken and queued, or queued by the budget yield), in ~chan_op:
//   1. remove the stop callback (waits for one in flight);
//   2. under the lock, unlink the node if it is still linked (it was not completed);
//   3. wait until no waker holds it (`in_hand_` clear);
//   4. if a recv had been handed a value, give it back.
// Threads: cancel() (the stop callback) on any thread; everything else on the coroutine's thread.
// Memory order: the node and the flags are written under the channel's lock (acquire/release
//   spin_lock); what a waker wrote reaches the resumed coroutine through executor::schedule;
//   `in_hand_` as in wait_list.hpp (release in wake_batch, acquire here).
// Rejected alternatives:
//  - a plain operation as a select of one branch (the first design): every op paid the decision
//    word (a CAS to claim, a fetch_or to arm), the select's generic two passes and out-of-line polls
//    through function pointers: 721 instructions per event in the chan lab, 342 with this path
//    (callgrind, -w 100 -t int, 1 worker);
//  - registering the stop callback before the first attempt (as wait_list does): a registration is
//    a lock and a list insertion on the task's stop state (stop_state.hpp), paid by every op that
//    completes at once.
#include <coroutine>
#include <optional>

#include <corio/detail/chan_waiter.hpp>
#include <corio/detail/coop_budget.hpp>
#include <corio/detail/executor.hpp>
#include <corio/detail/stop_state.hpp>

namespace corio::detail {

class chan_op : public parked_coroutine {
 public:
  explicit chan_op(chan_node& node) noexcept : node_(node) { node.parked_ = this; }
  chan_op(const chan_op&) = delete;
  chan_op& operator=(const chan_op&) = delete;
  ~chan_op() {
    if (suspended_) {
      abandon();
    }
  }

  /// Step 1. False if the task is cancelled already: then return completed(self).
  bool start(std::coroutine_handle<> self, stop_state* stop) noexcept {
    handle_ = self;
    owner_ = current_owner();
    stop_ = stop;
    if (stop != nullptr && stop->stop_requested()) {
      cancelled_ = true;
      return false;
    }
    return true;
  }

  /// Step 2, lock held, asked only when the op would block: whether nobody can cancel the task, so
  /// the first attempt may link the node at once.
  bool may_link_at_once() const noexcept { return stop_ == nullptr || !stop_->stop_possible(); }

  /// Lock held: the channel links the node now; the coroutine suspends once the lock is released.
  void linking() noexcept {
    registered_ = true;
    suspended_ = true;
  }

  /// Completed (or cancelled) without parking: spends the budget; true if the coroutine must suspend.
  bool completed(std::coroutine_handle<> self) { return yield_if_budget_spent(self, &suspended_); }

  /// Step 3; returns whether the coroutine suspended (after true, touch nothing).
  bool park(std::coroutine_handle<> self);

  /// await_resume: throws corio::cancelled (see the design note); the outcome is in the node's ok_.
  /// A send that completed inline stands whatever happened since, so only a recv looks at the stop.
  void finish(bool receiving) {
    if (suspended_ || cancelled_ || (receiving && stop_ != nullptr && stop_->stop_requested())) {
      finish_after_suspension();
    }
  }

 private:
  struct on_stop {
    chan_op* self;
    void operator()() const noexcept { self->cancel(); }
  };

  void finish_after_suspension();
  void cancel() noexcept;
  void abandon() noexcept;

  chan_node& node_;
  stop_state* stop_ = nullptr;
  bool suspended_ = false;   // parked or queued; touched by the coroutine's own thread only
  bool registered_ = false;  // linked or completed by park(): cancel() ignores an unlinked node then;
                             // guarded by the channel's lock
  bool cancelled_ = false;   // guarded by the channel's lock
  std::optional<stop_callback<on_stop>> stop_callback_;
};

}  // namespace corio::detail
