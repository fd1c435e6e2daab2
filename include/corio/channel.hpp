#pragma once
// corio::channel<T>: MPMC channels for coroutines (rendezvous, bounded, unbounded), with close,
// cancellation, and blocking calls for plain threads. select over them is in <corio/select.hpp>.
//
// Design note. The shared state and its invariants are in detail/channel_state.hpp, the waiter
// protocol (hand-off into parked frames, cancellation, frames destroyed mid-wait) in
// detail/chan_waiter.hpp (select) and detail/chan_op.hpp (a plain send or recv). This header only adds
// the handles and the awaiters.
// Values handed back: a send keeps a pointer to the caller's object and moves from it only when the
//   value is delivered (to a receiver or into the buffer). A send that fails (closed) or is cancelled
//   leaves the caller's object untouched: nothing the user gave the channel is silently dropped.
//   Consequence: `co_await tx.send(std::move(v))` is safe, but a send operation must be awaited in
//   the full-expression that created it (do not store it; `send(const T&)` copies, so it is exempt).
// Threads: handles may be copied, moved and used on any thread; a single handle object is not
//   itself synchronised (like std::shared_ptr), so give each task its own copy.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stop_token>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include <corio/cancellation.hpp>
#include <corio/detail/chan_op.hpp>
#include <corio/detail/deadline.hpp>
#include <corio/detail/channel_state.hpp>
#include <corio/detail/executor.hpp>
#include <corio/detail/promise_base.hpp>
#include <corio/errors.hpp>
#include <corio/sync_wait.hpp>

namespace corio {

/// Thrown when a channel handle that holds no channel (moved from or default-constructed) is used,
/// and by the blocking calls when made on an event loop or runtime worker thread. A programmer error.
class invalid_channel : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

/// What a non-blocking channel operation found.
enum class channel_status : std::uint8_t {
  ok,      ///< the value was sent / received
  full,    ///< try_send: no room and no receiver waiting (the value was not touched)
  empty,   ///< try_recv: nothing to receive yet
  closed,  ///< the channel is closed (try_recv: closed *and* drained; try_send: the value was not touched)
};

/// The outcome of `co_await tx.send(v)`: true if the value was delivered to a receiver or buffered,
/// false if the channel was closed (the caller's value is then untouched).
class [[nodiscard]] send_result {
 public:
  constexpr explicit send_result(bool delivered) noexcept : delivered_(delivered) {}
  /// True if the value was delivered or buffered.
  constexpr operator bool() const noexcept { return delivered_; }  // NOLINT: `bool ok = co_await ...`
  constexpr bool delivered() const noexcept { return delivered_; }

 private:
  bool delivered_;
};

/// The outcome of try_recv: the value if status is ok.
template <class T>
struct try_recv_result {
  channel_status status;
  std::optional<T> value;
  explicit operator bool() const noexcept { return status == channel_status::ok; }
};

template <class T>
class sender;
template <class T>
class receiver;
template <class T>
class recv_operation;
template <class T>
class send_operation;

namespace detail {

/// Drives one plain channel operation (chan_op.hpp) for recv_awaiter and send_awaiter.
template <class T, bool Receiving, class Promise>
bool suspend_plain(channel_state<T>& state, chan_node& node, chan_op& op, std::coroutine_handle<Promise> self) {
  if (!op.start(self, stop_token_of(self))) {
    return op.completed(self);
  }
  switch (state.template attempt<Receiving>(node, op)) {
    case op_status::parked:
      return true;  // another thread may already have resumed us: touch nothing
    case op_status::would_block:
      return op.park(self);
    case op_status::done:
    case op_status::closed:
      break;
  }
  return op.completed(self);
}

template <class T>
class recv_awaiter {
 public:
  explicit recv_awaiter(channel_state<T>& state) noexcept
      : state_(state), node_(&state, channel_state<T>::recv_ops, &slot_, 0), op_(node_) {}
  recv_awaiter(const recv_awaiter&) = delete;
  recv_awaiter& operator=(const recv_awaiter&) = delete;

  bool await_ready() const noexcept { return false; }
  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> self) {
    return suspend_plain<T, true>(state_, node_, op_, self);
  }
  std::optional<T> await_resume() {
    op_.finish(true);
    return std::move(slot_);
  }

 private:
  channel_state<T>& state_;
  std::optional<T> slot_;
  chan_node node_;
  chan_op op_;  // last: destroyed first, while the node and slot it may give back still exist
};

template <class T>
class send_awaiter {
 public:
  send_awaiter(channel_state<T>& state, T* source, std::optional<T>&& copy) noexcept
      : state_(state),
        copy_(std::move(copy)),
        node_(&state, channel_state<T>::send_ops, copy_ ? &*copy_ : source, 0),
        op_(node_) {}
  send_awaiter(const send_awaiter&) = delete;
  send_awaiter& operator=(const send_awaiter&) = delete;

  bool await_ready() const noexcept { return false; }
  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> self) {
    return suspend_plain<T, false>(state_, node_, op_, self);
  }
  send_result await_resume() {
    op_.finish(false);
    return send_result(node_.ok_);
  }

 private:
  channel_state<T>& state_;
  std::optional<T> copy_;  // send(const T&) sends this copy
  chan_node node_;
  chan_op op_;
};

/// The state behind a handle, or corio::invalid_channel if the handle holds none.
template <class State>
State& checked(State* state, const char* operation);

/// What sender and receiver share: a counted reference to the channel, close(), and the misuse check.
/// `Sending` says which count the handle holds.
template <class T, bool Sending>
class channel_handle {
 public:
  /// Closes the channel for everyone: parked senders fail, parked receivers drain then get nullopt.
  /// Returns false if it was already closed.
  bool close() { return checked(state_, "channel::close").close(); }
  /// True once the channel is closed (by close(), or because every sender or every receiver is gone).
  bool is_closed() const { return checked(state_, "channel::is_closed").closed(); }
  /// True if this handle holds a channel.
  explicit operator bool() const noexcept { return state_ != nullptr; }

 protected:
  channel_handle() noexcept = default;
  explicit channel_handle(channel_state<T>* state) noexcept : state_(state) {}
  channel_handle(const channel_handle& other) noexcept : state_(other.state_) {
    if (state_ != nullptr) {
      Sending ? state_->add_sender() : state_->add_receiver();
    }
  }
  channel_handle(channel_handle&& other) noexcept : state_(std::exchange(other.state_, nullptr)) {}
  // Two overloads, not one taking its argument by value: sender's and receiver's implicit assignments
  // call these with a derived handle, which could not build a by-value base argument (its
  // constructors and destructor are protected), so neither handle could be assigned at all.
  channel_handle& operator=(const channel_handle& other) noexcept {
    channel_handle copy(other);
    std::swap(state_, copy.state_);
    return *this;
  }
  channel_handle& operator=(channel_handle&& other) noexcept {
    channel_handle taken(std::move(other));
    std::swap(state_, taken.state_);
    return *this;
  }
  ~channel_handle() {
    if (state_ != nullptr) {
      Sending ? state_->drop_sender() : state_->drop_receiver();
    }
  }

  channel_state<T>* state_ = nullptr;
};

// Cold and out of line, so that checked() inlines into every operation as one test and branch.
[[noreturn, gnu::cold, gnu::noinline]] inline void throw_no_channel(const char* operation) {
  throw invalid_channel(std::string("corio::") + operation +
                        ": the handle holds no channel (it was moved from or default-constructed)");
}

template <class State>
State& checked(State* state, const char* operation) {
  if (state == nullptr) {
    throw_no_channel(operation);
  }
  return *state;
}

inline void refuse_on_executor(const char* operation) {
  if (const char* why = blocking_refused_here()) {
    throw invalid_channel(std::string("corio::") + operation + ": blocking call " + why);
  }
}

// Runs a channel operation on a plain thread for at most `timeout`: its result, or nullopt if the
// deadline stopped it first. The deadline's stop request cancels it as a cancelled task's would: a
// value handed to a recv in that same instant goes back to the channel, never lost, and a send that
// did not deliver leaves its value with the caller.
template <class Operation, class Rep, class Period>
std::optional<await_result_t<Operation>> blocking_for(Operation operation, std::chrono::duration<Rep, Period> timeout) {
  std::stop_source deadline;
  try {
    return make_sync_wait_driver(with_stop_token(deadline.get_token(), as_task(std::move(operation))))
        .run_until(deadline_after<std::chrono::steady_clock>(timeout), [&] { deadline.request_stop(); });
  } catch (const cancelled&) {
    return std::nullopt;
  }
}

}  // namespace detail

/// `co_await rx.recv()`, or a branch of corio::select. A description: it does nothing until awaited.
template <class T>
class recv_operation {
 public:
  detail::recv_awaiter<T> operator co_await() const noexcept { return detail::recv_awaiter<T>(*state_); }
  detail::channel_state<T>& state() const noexcept { return *state_; }

 private:
  friend class receiver<T>;
  explicit recv_operation(detail::channel_state<T>& state) noexcept : state_(&state) {}
  detail::channel_state<T>* state_;
};

/// `co_await tx.send(v)`, or a branch of corio::select. It refers to the caller's value (see the note
/// at the top): await it in the full-expression that made it. It is awaited once: a second
/// `co_await` of the same operation (which would send a moved-from value) throws invalid_channel.
template <class T>
class send_operation {
 public:
  /// The moved-from operation counts as awaited: it holds the value no more.
  send_operation(send_operation&& other) noexcept
      : state_(std::exchange(other.state_, nullptr)), source_(other.source_), copy_(std::move(other.copy_)) {}
  send_operation& operator=(send_operation&&) = delete;

  detail::send_awaiter<T> operator co_await() && {
    if (state_ == nullptr) {
      throw invalid_channel("corio::sender::send: this send operation was awaited already; make one per send");
    }
    return detail::send_awaiter<T>(*std::exchange(state_, nullptr), source_, std::move(copy_));
  }
  detail::channel_state<T>& state() const noexcept { return *state_; }
  /// Awaited, or moved from, already: it holds no value to send (select refuses it).
  bool spent() const noexcept { return state_ == nullptr; }
  /// For select: the value to send (the caller's, or this operation's copy), and the copy.
  T* source() noexcept { return source_; }
  std::optional<T>& copy() noexcept { return copy_; }

 private:
  friend class sender<T>;
  send_operation(detail::channel_state<T>& state, T* source, std::optional<T> copy) noexcept
      : state_(&state), source_(source), copy_(std::move(copy)) {}
  detail::channel_state<T>* state_;
  T* source_;
  std::optional<T> copy_;
};

/// The sending half of a channel. Copyable (each copy counts as one sender) and movable; the channel
/// closes when the last sender is destroyed, after which receivers drain what is buffered and then
/// get nullopt. Every member may be called from any thread. The sending members are const (as tokio's
/// `&self`): one handle may send from several threads at once, and a lambda that captured it needs
/// no `mutable`; only assigning to a handle must not race with its use. Using a moved-from or
/// default-constructed sender throws corio::invalid_channel.
///
///     auto [tx, rx] = corio::channel<std::string>(16);
///     std::string line = "hello";
///     if (!co_await tx.send(std::move(line))) { /* closed: `line` still holds "hello" */ }
template <class T>
class sender : public detail::channel_handle<T, true> {
  using detail::channel_handle<T, true>::state_;

 public:
  /// A sender of no channel.
  sender() noexcept = default;

  /// `co_await tx.send(std::move(v))` delivers v: straight into a waiting receiver (which resumes on
  /// its own executor; from a runtime worker it runs next on this worker), else into the buffer, else
  /// it suspends until a receiver makes room (rendezvous: until a receiver takes it). Resumes on the
  /// executor it suspended on. Returns a send_result: false if the channel is or gets closed, with
  /// `v` untouched. If the task is cancelled while it waits, throws corio::cancelled with `v`
  /// untouched; a send that has already delivered reports true (it cannot be undone).
  [[nodiscard]] send_operation<T> send(T&& value) const {
    return send_operation<T>(detail::checked(state_, "sender::send"), &value, std::nullopt);
  }
  /// Sends a copy of `value` (made at once); otherwise as above.
  [[nodiscard]] send_operation<T> send(const T& value) const
    requires std::is_copy_constructible_v<T>
  {
    return send_operation<T>(detail::checked(state_, "sender::send"), nullptr, std::optional<T>(value));
  }

  /// Never suspends: ok (delivered or buffered; `value` moved from), full or closed (`value` untouched).
  [[nodiscard]] channel_status try_send(T&& value) const {
    return status_of(detail::checked(state_, "sender::try_send").try_send(value));
  }
  [[nodiscard]] channel_status try_send(const T& value) const
    requires std::is_copy_constructible_v<T>
  {
    T copy(value);
    return try_send(std::move(copy));
  }

  /// For plain threads: as send_blocking, for at most `timeout`: ok (delivered), closed, or full if
  /// there was no room in time; unless ok, `value` is untouched.
  template <class Rep, class Period>
  channel_status send_blocking_for(T&& value, std::chrono::duration<Rep, Period> timeout) const {
    detail::refuse_on_executor("sender::send_blocking_for");
    std::optional<send_result> sent = detail::blocking_for(send(std::move(value)), timeout);
    return !sent ? channel_status::full : sent->delivered() ? channel_status::ok : channel_status::closed;
  }

  /// For plain threads: blocks the thread until the value is delivered (true) or the channel closed
  /// (false, `value` untouched). Throws corio::invalid_channel on an event loop or runtime worker.
  bool send_blocking(T&& value) const {
    detail::refuse_on_executor("sender::send_blocking");
    return sync_wait(send(std::move(value)));
  }
  bool send_blocking(const T& value) const
    requires std::is_copy_constructible_v<T>
  {
    detail::refuse_on_executor("sender::send_blocking");
    return sync_wait(send(value));
  }

 private:
  template <class U>
  friend std::pair<sender<U>, receiver<U>> channel(std::size_t);
  template <class U>
  friend std::pair<sender<U>, receiver<U>> unbounded_channel();
  explicit sender(detail::channel_state<T>* state) noexcept : detail::channel_handle<T, true>(state) {}

  static channel_status status_of(detail::op_status status) noexcept {
    return status == detail::op_status::done      ? channel_status::ok
           : status == detail::op_status::closed ? channel_status::closed
                                                 : channel_status::full;
  }
};

/// The receiving half of a channel. Copyable (MPMC: each value goes to exactly one receiver, in FIFO
/// order of arrival) and movable; when the last receiver is destroyed the channel closes, senders
/// fail, and the values still buffered are destroyed. Threads and misuse as for sender.
///
///     while (std::optional<std::string> line = co_await rx.recv()) {
///       consume(*line);
///     }  // nullopt: closed and drained
template <class T>
class receiver : public detail::channel_handle<T, false> {
  using detail::channel_handle<T, false>::state_;

 public:
  /// A receiver of no channel.
  receiver() noexcept = default;

  /// `co_await rx.recv()` takes the oldest value (a blocked sender's value moves into the freed slot),
  /// or suspends until one arrives; nullopt once the channel is closed and drained. Resumes on the
  /// executor it suspended on. If the task is cancelled while it waits, throws corio::cancelled; a
  /// value handed to it just before goes to the next receiver (or back to the front of the buffer),
  /// never lost; so does one a recv that lost a when_any had won. The exception: once a receiver
  /// was told the channel is closed and drained, nothing may appear in it again, so a cancelled recv
  /// returns such a value, and a when_any that picked another operand destroys it. To bound the
  /// wait, `corio::select(rx.recv(), corio::after(d))` or `corio::with_timeout(d, rx.recv())`
  /// (which throws corio::timed_out having taken nothing: a value handed over as the deadline fired
  /// goes back to the channel, as for any cancellation).
  [[nodiscard]] recv_operation<T> recv() { return recv_operation<T>(detail::checked(state_, "receiver::recv")); }

  /// Never suspends: ok with the value, empty, or closed (closed and drained).
  [[nodiscard]] try_recv_result<T> try_recv() {
    try_recv_result<T> result{channel_status::empty, std::nullopt};
    detail::op_status status = detail::checked(state_, "receiver::try_recv").try_recv(result.value);
    result.status = status == detail::op_status::done      ? channel_status::ok
                    : status == detail::op_status::closed ? channel_status::closed
                                                          : channel_status::empty;
    return result;
  }

  /// For plain threads: blocks until a value arrives or the channel is closed and drained (nullopt).
  /// Throws corio::invalid_channel on an event loop or runtime worker.
  std::optional<T> recv_blocking() {
    detail::refuse_on_executor("receiver::recv_blocking");
    return sync_wait(recv());
  }

  /// For plain threads: as recv_blocking, for at most `timeout` (std::sync::mpsc's recv_timeout): ok
  /// with the value, closed (closed and drained), or empty if nothing arrived in time (a value handed
  /// over just as the time ran out stays in the channel).
  template <class Rep, class Period>
  try_recv_result<T> recv_blocking_for(std::chrono::duration<Rep, Period> timeout) {
    detail::refuse_on_executor("receiver::recv_blocking_for");
    std::optional<std::optional<T>> got = detail::blocking_for(recv(), timeout);
    if (!got) {
      return {channel_status::empty, std::nullopt};
    }
    return {*got ? channel_status::ok : channel_status::closed, std::move(*got)};
  }

  /// How many values are buffered right now (a snapshot).
  std::size_t size() const { return detail::checked(state_, "receiver::size").size(); }
 private:
  template <class U>
  friend std::pair<sender<U>, receiver<U>> channel(std::size_t);
  template <class U>
  friend std::pair<sender<U>, receiver<U>> unbounded_channel();
  explicit receiver(detail::channel_state<T>* state) noexcept : detail::channel_handle<T, false>(state) {}
};

/// A channel of capacity `capacity`: 0 is a rendezvous (a send completes when a receiver takes the
/// value, like Go's unbuffered chan), N > 0 buffers up to N values. One allocation (the state and its
/// buffer); no allocation per message. T must be nothrow move constructible. The buffer is allocated
/// up front: a capacity too large to address throws std::length_error (SIZE_MAX too: for no bound at
/// all, use unbounded_channel), one the allocator refuses throws std::bad_alloc.
///
///     auto [tx, rx] = corio::channel<int>(256);
template <class T>
[[nodiscard]] std::pair<sender<T>, receiver<T>> channel(std::size_t capacity) {
  if (capacity == detail::channel_state<T>::unbounded) {
    throw std::length_error(
        "corio::channel: capacity too large (for a channel without a bound, use unbounded_channel)");
  }
  detail::channel_state<T>* state = detail::channel_state<T>::create(capacity);
  return {sender<T>(state), receiver<T>(state)};
}

/// A channel whose sends never wait (the buffer grows by doubling). It keeps the largest buffer it
/// grew to until it is destroyed: a burst of a million values leaves that much memory with it (tokio's
/// gives blocks back); bound the channel, or replace it after a burst, where that matters.
template <class T>
[[nodiscard]] std::pair<sender<T>, receiver<T>> unbounded_channel() {
  detail::channel_state<T>* state = detail::channel_state<T>::create(detail::channel_state<T>::unbounded);
  return {sender<T>(state), receiver<T>(state)};
}

}  // namespace corio
