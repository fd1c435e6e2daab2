#pragma once
// The cancellation state of a chain of tasks: corio's own stop source, embedded in its owner.
//
// Design note.
// Purpose: every suspension of a cancellable task (a read, a write, a channel wait, a sleep) registers
//   a callback on its chain's stop state for as long as it is suspended, so registration is on the hot
//   path of every operation. libstdc++'s std::stop_callback costs six atomic read-modify-writes per
//   registration and removal (a reference on the shared state taken and dropped, and a lock taken and
//   released with an RMW each, twice), and every std::stop_source allocates its state. Here the state
//   lives inside its owner (a spawned task's record, when_any's frame, with_timeout's awaiter) and
//   callbacks borrow it: a registration is one CAS and one store, its removal the same, and an owner
//   costs no allocation.
// Lifetime (the owner's duty, as for every borrowed pointer in a chain): the state outlives every
//   callback registered on it and every request_stop() in progress on it. By construction: a task's
//   record outlives its frame and a join_handle's cancel(); when_any's and with_timeout's states outlive
//   the operands and forwarding callbacks they own, which are destroyed first.
// The word: `requested` (sticky), `locked`, `inert` (never_stops: nobody requests it, registrations on
//   it do nothing), `deadline` (set with `requested` when the request that made it was a deadline's:
//   an operation stopped through this state reports a timeout, not a cancellation). Only the lock
//   holder changes `requested` and `deadline`, and `inert` never changes, so the holder unlocks with a
//   plain store of the word it locked.
// Callbacks: an intrusive doubly linked list guarded by the lock.
// Who calls what:
//   request_stop(): any thread; the first one wins. Locks, sets `requested`, then pops one callback at
//     a time: records it as `running_`, unlocks, invokes it, marks it done, relocks. Callbacks run
//     without the lock, so one may register, remove or request anything, this state included.
//   registration (stop_callback's constructor), on the owner's thread: locks; if stop was requested,
//     unlocks and runs the callback at once, on this thread, as std::stop_callback does; else links it.
//   removal (stop_callback's destructor), on the owner's thread: locks; a linked callback is unlinked.
//     One that a request popped is running or has run: running on another thread, the destructor waits
//     for its done flag, so the frame the callback points into stays valid while it runs; running on
//     this thread (destroyed from inside its own invocation: this thread's list of running requests,
//     below, names this state), it tells the requester not to touch it again; not running, it has
//     finished.
//   destruction inside a callback: a callback may end the state's owner on the requesting thread (a
//     waiter parked on a plain thread, sync_wait's chain, is resumed inline by its waker, and the
//     chain goes on to destroy the with_stop_token or when_any frame holding this state). Each
//     thread keeps a list of the requests it is running (thread-local, innermost first); the
//     destructor of a state that was requested marks its own entry there, if any, as gone, and the
//     request then returns without touching the state. Every callback was removed before that (the
//     owner's duty), so none is left to run. Only the requesting thread can be inside a callback of
//     the request, so no lock is needed and the state carries nothing for it.
// Memory order: the lock is taken with an acquire CAS and released with a release store, so all list
//   work is ordered. `requested` is set under the lock and published by the release store that
//   unlocks, before any callback runs; stop_requested() is an acquire load: what a requester wrote
//   before request_stop() is visible to a task that sees the request. The done flag is
//   stored with release after the callback returned and waited for with acquire.
// Rejected: std::stop_source (above); one callback slot per state instead of a list (when_all's
//   operands share their parent's state and suspend at the same time); a lock-free list (removal of an
//   arbitrary node needs the lock or hazard handling, for callbacks that are registered and removed
//   with nothing in between almost every time).
#include <atomic>
#include <cstdint>
#include <optional>
#include <utility>

namespace corio::detail {

class stop_state;

/// The type-erased part of a stop_callback: its links and its run/done protocol.
class stop_callback_base {
 public:
  stop_callback_base(const stop_callback_base&) = delete;
  stop_callback_base& operator=(const stop_callback_base&) = delete;

 protected:
  using invoke_fn = void (*)(stop_callback_base& self) noexcept;
  explicit stop_callback_base(invoke_fn invoke) noexcept : invoke_(invoke) {}
  ~stop_callback_base() = default;

  /// Links this callback into `state`, or runs it now if stop was already requested.
  void attach(stop_state& state) noexcept;
  /// Unlinks it, or waits until a request running it on another thread is done with it.
  void detach() noexcept;

 private:
  friend class stop_state;

  invoke_fn invoke_;
  stop_state* state_ = nullptr;  // set while linked, or popped by a request (which may run it still)
  stop_callback_base* prev_ = nullptr;
  stop_callback_base* next_ = nullptr;
  bool* destroyed_ = nullptr;  // the requester's flag while it runs this callback
  bool linked_ = false;
  std::atomic<bool> done_{false};
};

struct never_stop_t {};

/// A stop source that is its own token. Not copyable or movable: callbacks point at it.
class stop_state {
 public:
  stop_state() noexcept = default;
  /// A state nobody requests (shield's): stop_possible() is false and registrations do nothing.
  explicit constexpr stop_state(never_stop_t) noexcept : word_(inert) {}
  stop_state(const stop_state&) = delete;
  stop_state& operator=(const stop_state&) = delete;
  ~stop_state() {
    if ((word_.load(std::memory_order_acquire) & requested) != 0) {
      tell_requester_gone();
    }
  }

  /// Any thread.
  bool stop_requested() const noexcept { return (word_.load(std::memory_order_acquire) & requested) != 0; }
  /// Any thread: false only for never_stops.
  bool stop_possible() const noexcept { return (word_.load(std::memory_order_relaxed) & inert) == 0; }
  /// Any thread: requests stop and runs every registered callback on this thread before returning.
  /// True for the call that made the request; false if stop was already requested (or impossible).
  /// `for_deadline`: the request is a deadline's (with_timeout's timer, or one forwarded from a state
  /// a deadline stopped), which stopped_by_deadline() then reports.
  bool request_stop(bool for_deadline = false) noexcept;
  /// Any thread: stop was requested, and the request that made it was a deadline's.
  bool stopped_by_deadline() const noexcept {
    return (word_.load(std::memory_order_acquire) & (requested | deadline)) == (requested | deadline);
  }

 private:
  friend class stop_callback_base;
  static constexpr std::uint32_t requested = 1;
  static constexpr std::uint32_t locked = 2;
  static constexpr std::uint32_t inert = 4;
  static constexpr std::uint32_t deadline = 8;  // set with `requested` by a deadline's request

  /// Takes the lock; returns the word as it was, without `locked`.
  std::uint32_t lock() noexcept {
    std::uint32_t word = word_.load(std::memory_order_relaxed) & ~locked;
    if (word_.compare_exchange_weak(word, word | locked, std::memory_order_acquire, std::memory_order_relaxed)) {
      return word;
    }
    return lock_contended();
  }
  std::uint32_t lock_contended() noexcept;
  void unlock(std::uint32_t word) noexcept { word_.store(word, std::memory_order_release); }

  void push(stop_callback_base& callback) noexcept;
  void unlink(stop_callback_base& callback) noexcept;
  /// Removal of a callback a request popped: see "removal" above.
  void wait_until_done(stop_callback_base& callback) noexcept;
  /// Destruction of a requested state: see "destruction inside a callback" above.
  void tell_requester_gone() const noexcept;

  std::atomic<std::uint32_t> word_{0};
  stop_callback_base* head_ = nullptr;
  stop_callback_base* running_ = nullptr;  // the callback a request is running, under the lock
};

/// The state of chains that must not be cancelled (corio::shield).
inline stop_state never_stops{never_stop_t{}};

/// A callback that requests stop on another state: how an outer cancellation reaches an inner one
/// (when_any's operands, with_timeout's operand, with_stop_token's body). Given the state it is
/// registered on (`from`), it forwards a deadline's request as a deadline's.
struct request_stop_of {
  stop_state* target;
  const stop_state* from = nullptr;
  void operator()() const noexcept { target->request_stop(from != nullptr && from->stopped_by_deadline()); }
};

/// Registers `Callback` on a stop_state for its lifetime (std::stop_callback's counterpart): it runs
/// once, on the requesting thread, when stop is requested, or at once in the constructor if it was
/// already. The destructor waits for a run in progress on another thread.
template <class Callback>
class stop_callback : stop_callback_base {
 public:
  stop_callback(stop_state& state, Callback callback) noexcept
      : stop_callback_base(&invoke), callback_(std::move(callback)) {
    attach(state);
  }
  ~stop_callback() { detach(); }

 private:
  static void invoke(stop_callback_base& self) noexcept { static_cast<stop_callback&>(self).callback_(); }

  Callback callback_;
};

/// An operand's own stop state (when_any's operands, with_timeout's operand, with_stop_token's body):
/// stopped by its owner for its own reasons (a lost race, a deadline) and, through `forward`,
/// whenever the awaiting task's state is.
struct operand_stop {
  stop_state state;  // declared first, destroyed last: `forward` points at it
  std::optional<stop_callback<request_stop_of>> forward;

  /// Stops `state` whenever `outer` (the awaiting task's state; null: none) is stopped.
  void follow(stop_state* outer) noexcept {
    if (outer != nullptr) {
      forward.emplace(*outer, request_stop_of{&state, outer});
    }
  }
};

inline void stop_callback_base::attach(stop_state& state) noexcept {
  if (!state.stop_possible()) {
    return;
  }
  std::uint32_t word = state.lock();
  if ((word & stop_state::requested) != 0) {
    state.unlock(word);
    invoke_(*this);
    return;
  }
  state.push(*this);
  state_ = &state;
  state.unlock(word);
}

inline void stop_callback_base::detach() noexcept {
  if (state_ == nullptr) {
    return;
  }
  stop_state& state = *state_;
  std::uint32_t word = state.lock();
  if (linked_) {
    state.unlink(*this);
    state.unlock(word);
    return;
  }
  state.unlock(word);
  state.wait_until_done(*this);
}

inline void stop_state::push(stop_callback_base& callback) noexcept {
  callback.prev_ = nullptr;
  callback.next_ = head_;
  if (head_ != nullptr) {
    head_->prev_ = &callback;
  }
  head_ = &callback;
  callback.linked_ = true;
}

inline void stop_state::unlink(stop_callback_base& callback) noexcept {
  if (callback.prev_ != nullptr) {
    callback.prev_->next_ = callback.next_;
  } else {
    head_ = callback.next_;
  }
  if (callback.next_ != nullptr) {
    callback.next_->prev_ = callback.prev_;
  }
  callback.linked_ = false;
}

}  // namespace corio::detail
