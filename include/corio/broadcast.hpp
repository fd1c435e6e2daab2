#pragma once
// corio::broadcast<T>: every receiver sees every message; a receiver that falls too far behind is
// told how many it missed and continues (tokio's broadcast).
//
// Design note.
// Purpose: fan-out of events to many subscribers without letting a slow one block the sender.
// State: a ring of `capacity` slots holding the last `capacity` messages, the sequence number of the
//   next message (`tail`), the number of live receivers and `closed` (every sender gone), all guarded
//   by one wait_list's lock (detail/wait_list.hpp holds the parking, cancellation and shutdown
//   protocol). Message `s` lives in slot `s % capacity` while s >= tail - capacity. Each receiver
//   keeps the sequence number it will read next, and each slot counts the receivers that have yet to
//   read its message: set to `receivers` by the send, decremented by each read (the last one moves the
//   message out instead of copying it) and by a receiver that goes before reading it, incremented by
//   a receiver copied from one that has yet to read it. At zero the message is destroyed, so a message
//   every receiver read (or every receiver is gone) holds nothing alive, as in tokio. Two allocations
//   per broadcast (the state, the ring).
// Invariants: tail only grows; a send never waits (it overwrites the oldest slot); a receiver whose
//   next sequence fell below tail - capacity gets lagged{missed = tail - capacity - next} once and
//   continues at tail - capacity, so received + the sum of missed counts equals what was sent after
//   it subscribed; a receiver waits only while next == tail and a sender lives. A wait consumes
//   nothing (each receiver copies the message out), so a cancelled wait has nothing to give back.
// Threads: every member is thread-safe; one handle object per task at a time, and one recv at a time
//   per receiver object (detail/lone_waiter.hpp: a second one in flight throws std::logic_error).
//   T is copied to each receiver under the lock: keep it cheap to copy (or share it with
//   std::shared_ptr<const U>), and it must not hold a handle of the broadcast it travels on (that
//   handle's copy would take the lock the copy runs under). T must be nothrow move constructible:
//   a send moves the oldest message out and the new one in under the lock, with no way back.
// Rejected: one channel per subscriber (a send costs O(receivers) locks and one slow receiver blocks
//   everyone or grows without bound).
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <variant>

#include <corio/channel.hpp>
#include <corio/detail/lone_waiter.hpp>
#include <corio/detail/wait_list.hpp>

namespace corio {

/// A broadcast receive that fell behind: `missed` messages were overwritten before it read them.
struct lagged {
  std::uint64_t missed;
  friend bool operator==(const lagged&, const lagged&) = default;
};

/// A broadcast receive after every sender is gone and every message was read.
struct broadcast_closed {
  friend bool operator==(const broadcast_closed&, const broadcast_closed&) = default;
};

/// What a broadcast receive yields: the next message, how many were missed, or closed.
template <class T>
using broadcast_result = std::variant<T, lagged, broadcast_closed>;

template <class T>
class broadcast_sender;
template <class T>
class broadcast_receiver;

namespace detail {

template <class T>
struct broadcast_state {
  static_assert(std::is_copy_constructible_v<T>, "corio::broadcast<T>: T must be copy constructible");
  static_assert(std::is_nothrow_move_constructible_v<T>,
                "corio::broadcast<T>: T must be nothrow move constructible (messages move under a lock)");
  struct slot {
    std::optional<T> message;
    std::size_t unread = 0;  // receivers that have yet to read `message`
  };
  explicit broadcast_state(std::size_t capacity) : slots(std::make_unique<slot[]>(capacity)), capacity(capacity) {}
  wait_list waiters;  // its lock guards the members below
  std::unique_ptr<slot[]> slots;
  std::size_t capacity;
  std::uint64_t tail = 0;
  std::size_t senders = 1;
  std::size_t receivers = 1;
  bool closed = false;

  // Lock held. The next result for a receiver at `next`, or nothing yet.
  std::optional<broadcast_result<T>> take(std::uint64_t& next) {
    std::uint64_t oldest = tail > capacity ? tail - capacity : 0;
    if (next < oldest) {
      std::uint64_t missed = oldest - next;
      next = oldest;
      return broadcast_result<T>(lagged{missed});
    }
    if (next < tail) {
      slot& kept = slots[next % capacity];
      if (kept.unread == 1) {  // the last reader takes the message itself
        broadcast_result<T> result(std::in_place_index<0>, std::move(*kept.message));
        kept.message.reset();
        kept.unread = 0;
        ++next;
        return result;
      }
      broadcast_result<T> result(std::in_place_index<0>, *kept.message);  // may throw: next unchanged
      --kept.unread;
      ++next;
      return result;
    }
    if (closed) {
      return broadcast_result<T>(broadcast_closed{});
    }
    return std::nullopt;
  }

  // Lock held. A receiver at `next` joins (+1) or leaves (-1) the readers of every message it has yet
  // to read; a message left with none is destroyed.
  void count_reader(std::uint64_t next, int change) noexcept {
    std::uint64_t oldest = tail > capacity ? tail - capacity : 0;
    for (std::uint64_t s = next > oldest ? next : oldest; s < tail; ++s) {
      slot& kept = slots[s % capacity];
      if (!kept.message) {
        continue;
      }
      kept.unread = change > 0 ? kept.unread + 1 : kept.unread - 1;
      if (kept.unread == 0) {
        kept.message.reset();
      }
    }
  }
};

// The awaiter of broadcast_receiver::recv(), made by co_await from a wait_operation whose context
// is the receiver.
template <class T>
class broadcast_recv_awaiter : public lone_waiter<broadcast_receiver<T>> {
 public:
  using lone_waiter<broadcast_receiver<T>>::lone_waiter;
  broadcast_result<T> await_resume() {
    typename lone_waiter<broadcast_receiver<T>>::ending wait_ends(*this);
    waiter::await_resume();
    broadcast_receiver<T>& receiver = this->receiver();
    broadcast_state<T>& state = *receiver.state_;
    std::lock_guard guard(state.waiters.mutex());
    return *state.take(receiver.next_);  // ready() held under the lock, and no other wait of this receiver runs
  }

  static bool ready(void* context) noexcept {  // under the lock
    auto& receiver = *static_cast<broadcast_receiver<T>*>(context);
    return receiver.next_ != receiver.state_->tail || receiver.state_->closed;
  }
  static constexpr waiter::operations ops{&ready, nullptr};
};

}  // namespace detail

/// The sending half of a broadcast. Copyable; when the last sender is gone, receivers read what is
/// left and then get broadcast_closed. Throws corio::invalid_channel when moved from.
template <class T>
class broadcast_sender {
 public:
  broadcast_sender() noexcept = default;
  broadcast_sender(const broadcast_sender& other) : state_(other.state_) {
    if (state_) {
      std::lock_guard guard(state_->waiters.mutex());
      ++state_->senders;
    }
  }
  broadcast_sender(broadcast_sender&&) noexcept = default;
  broadcast_sender& operator=(broadcast_sender other) noexcept {
    std::swap(state_, other.state_);
    return *this;
  }
  ~broadcast_sender() {
    if (!state_) {
      return;
    }
    detail::wake_batch woken;
    std::lock_guard guard(state_->waiters.mutex());
    if (--state_->senders == 0) {
      state_->closed = true;
      state_->waiters.wake_all(woken);
    }
  }

  /// Publishes `value` to every current receiver without waiting (overwriting the oldest message if
  /// the ring is full). Returns false, with `value` untouched, if there is no receiver.
  bool send(T&& value) {
    detail::broadcast_state<T>& state = detail::checked(state_.get(), "broadcast_sender::send");
    std::optional<T> overwritten;  // destroyed after the lock is released
    detail::wake_batch woken;
    std::lock_guard guard(state.waiters.mutex());
    if (state.receivers == 0) {
      return false;
    }
    auto& slot = state.slots[state.tail % state.capacity];
    if (slot.message) {
      overwritten.emplace(std::move(*slot.message));
    }
    slot.message.emplace(std::move(value));
    slot.unread = state.receivers;
    ++state.tail;
    state.waiters.wake_all(woken);
    return true;
  }
  bool send(const T& value) {
    T copy(value);
    return send(std::move(copy));
  }

  /// A new receiver that sees the messages sent from now on.
  [[nodiscard]] broadcast_receiver<T> subscribe() const {
    detail::broadcast_state<T>& state = detail::checked(state_.get(), "broadcast_sender::subscribe");
    std::lock_guard guard(state.waiters.mutex());
    ++state.receivers;
    return broadcast_receiver<T>(state_, state.tail);
  }

 private:
  template <class U>
  friend std::pair<broadcast_sender<U>, broadcast_receiver<U>> broadcast(std::size_t);
  explicit broadcast_sender(std::shared_ptr<detail::broadcast_state<T>> state) noexcept : state_(std::move(state)) {}
  std::shared_ptr<detail::broadcast_state<T>> state_;
};

/// A receiving half of a broadcast: it reads every message sent after it subscribed, in order.
/// Copyable (the copy continues from the same position). Throws corio::invalid_channel when moved from.
///
///     auto [tx, rx] = corio::broadcast<event>(64);
///     for (;;) {
///       auto r = co_await rx.recv();
///       if (auto* e = std::get_if<event>(&r)) handle(*e);
///       else if (auto* l = std::get_if<corio::lagged>(&r)) log_missed(l->missed);
///       else break;  // corio::broadcast_closed
///     }
template <class T>
class broadcast_receiver {
 public:
  broadcast_receiver() noexcept = default;
  broadcast_receiver(const broadcast_receiver& other) : state_(other.state_), next_(other.next_) {
    if (state_) {
      std::lock_guard guard(state_->waiters.mutex());
      ++state_->receivers;
      state_->count_reader(next_, +1);
    }
  }
  broadcast_receiver(broadcast_receiver&& other) noexcept
      : state_(std::move(other.state_)), next_(other.next_) {}
  broadcast_receiver& operator=(broadcast_receiver other) noexcept {
    std::swap(state_, other.state_);
    std::swap(next_, other.next_);
    return *this;
  }
  /// Messages it has yet to read that no other receiver will read are destroyed with it.
  ~broadcast_receiver() {
    if (state_) {
      std::lock_guard guard(state_->waiters.mutex());
      --state_->receivers;
      state_->count_reader(next_, -1);
    }
  }

  /// `co_await rx.recv()` yields the next message (a copy), lagged{n} if n messages were overwritten
  /// before this receiver read them (it then continues with the oldest one kept), or broadcast_closed
  /// once every sender is gone and everything was read. One recv at a time per receiver object: a
  /// second one in flight (when_all(rx.recv(), rx.recv())) throws std::logic_error. Resumes on the
  /// executor it suspended on; cancellation throws corio::cancelled and skips nothing. The operation is a copyable
  /// description that does nothing until awaited, so it may be passed to with_timeout or when_any
  /// (a recv that loses takes nothing: the message stays for the next recv); the receiver must
  /// outlive it. corio::select takes channel operations only.
  [[nodiscard]] detail::wait_operation<detail::broadcast_recv_awaiter<T>> recv() {
    detail::broadcast_state<T>& state = detail::checked(state_.get(), "broadcast_receiver::recv");
    return {&state.waiters, this, &detail::broadcast_recv_awaiter<T>::ops};
  }

  /// Never suspends: the next result, or nullopt if nothing new has been sent.
  [[nodiscard]] std::optional<broadcast_result<T>> try_recv() {
    detail::broadcast_state<T>& state = detail::checked(state_.get(), "broadcast_receiver::try_recv");
    std::lock_guard guard(state.waiters.mutex());
    return state.take(next_);
  }

 private:
  friend class broadcast_sender<T>;
  friend class detail::broadcast_recv_awaiter<T>;
  friend class detail::lone_waiter<broadcast_receiver>;
  static constexpr const char* wait_name = "corio::broadcast_receiver::recv";
  template <class U>
  friend std::pair<broadcast_sender<U>, broadcast_receiver<U>> broadcast(std::size_t);
  broadcast_receiver(std::shared_ptr<detail::broadcast_state<T>> state, std::uint64_t next) noexcept
      : state_(std::move(state)), next_(next) {}

  std::shared_ptr<detail::broadcast_state<T>> state_;
  std::uint64_t next_ = 0;
  detail::lone_wait lone_;
};

/// A connected broadcast keeping the last `capacity` messages (> 0; std::invalid_argument otherwise).
template <class T>
[[nodiscard]] std::pair<broadcast_sender<T>, broadcast_receiver<T>> broadcast(std::size_t capacity) {
  if (capacity == 0) {
    throw std::invalid_argument("corio::broadcast: capacity must be at least 1");
  }
  auto state = std::make_shared<detail::broadcast_state<T>>(capacity);
  return {broadcast_sender<T>(state), broadcast_receiver<T>(state, 0)};
}

}  // namespace corio
