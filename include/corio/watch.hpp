#pragma once
// corio::watch<T>: one sender publishes a value; receivers read the latest and can await a change.
//
// Design note.
// Purpose: configuration or state broadcast where only the newest value matters (tokio's watch).
// State: the value, a version counter and `closed_`, all guarded by one wait_list's lock
//   (detail/wait_list.hpp holds the parking, cancellation and shutdown protocol). Each receiver keeps
//   the version it last saw. One allocation (std::make_shared) per watch.
// Invariants: version only grows; a receiver waiting in changed() is parked only while its seen
//   version equals the current one and the sender lives. send() and the sender's destruction wake
//   every waiter; a wait consumes nothing, so a cancelled wait has nothing to give back.
// Threads: every member is thread-safe; one handle object should be used by one task at a time
//   (copy receivers instead), and one changed() at a time per receiver object (detail/lone_waiter.hpp:
//   a second one in flight throws std::logic_error). T is copied out under the lock (borrow), so keep
//   T cheap to copy or share it (std::shared_ptr<const U>). send() swaps the new value in under the
//   lock, so T's move construction and move assignment must not throw: a throw halfway would leave a
//   value published that no waiter hears of, or none at all.
// Rejected: the channel waiter (chan_waiter): there is no value to hand over, only a condition to
//   re-check, which is exactly what the sync primitives' waiter does.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <type_traits>
#include <utility>

#include <corio/channel.hpp>
#include <corio/detail/lone_waiter.hpp>
#include <corio/detail/wait_list.hpp>

namespace corio {

template <class T>
class watch_sender;
template <class T>
class watch_receiver;

namespace detail {

template <class T>
struct watch_state {
  static_assert(std::is_copy_constructible_v<T>, "corio::watch<T>: T must be copy constructible");
  static_assert(std::is_nothrow_move_constructible_v<T> && std::is_nothrow_move_assignable_v<T>,
                "corio::watch<T>: T's move construction and assignment must be noexcept (send swaps under a lock)");
  explicit watch_state(T initial) : value(std::move(initial)) {}
  wait_list waiters;  // its lock guards the members below
  T value;
  std::uint64_t version = 0;
  bool closed = false;
};

}  // namespace detail

/// The publishing half of a watch. Move-only (one publisher). Destroying it closes the watch: waiting
/// receivers wake and changed() returns false from then on (the last value stays readable).
template <class T>
class watch_sender {
 public:
  watch_sender() noexcept = default;
  watch_sender(watch_sender&&) noexcept = default;
  watch_sender& operator=(watch_sender&& other) noexcept {
    if (this != &other) {
      close();
      state_ = std::move(other.state_);
    }
    return *this;
  }
  ~watch_sender() { close(); }

  /// Replaces the value and wakes every receiver waiting in changed(). Returns false if no receiver
  /// was left to see it (tokio's send fails then; here the value is stored anyway, for receivers that
  /// subscribe() later). Throws corio::invalid_channel on a moved-from sender.
  bool send(T value) {
    detail::watch_state<T>& state = detail::checked(state_.get(), "watch_sender::send");
    {
      detail::wake_batch woken;
      std::lock_guard guard(state.waiters.mutex());
      std::swap(state.value, value);  // the old value is destroyed after the lock is released
      ++state.version;
      state.waiters.wake_all(woken);
    }
    return receiver_count() != 0;
  }

  /// How many receivers there are now (each holds the watch's state; so does this sender).
  [[nodiscard]] std::size_t receiver_count() const {
    detail::checked(state_.get(), "watch_sender::receiver_count");
    return static_cast<std::size_t>(state_.use_count() - 1);
  }

  /// A new receiver that has seen the current value.
  [[nodiscard]] watch_receiver<T> subscribe() const;

 private:
  template <class U>
  friend std::pair<watch_sender<U>, watch_receiver<U>> watch(U initial);
  explicit watch_sender(std::shared_ptr<detail::watch_state<T>> state) noexcept : state_(std::move(state)) {}

  void close() noexcept {
    if (!state_) {
      return;
    }
    detail::wake_batch woken;
    std::lock_guard guard(state_->waiters.mutex());
    state_->closed = true;
    state_->waiters.wake_all(woken);
  }

  std::shared_ptr<detail::watch_state<T>> state_;
};

namespace detail {

// The awaiter of watch_receiver::changed(), made by co_await from a wait_operation whose context is
// the receiver.
template <class T>
class changed_awaiter : public lone_waiter<watch_receiver<T>> {
 public:
  using lone_waiter<watch_receiver<T>>::lone_waiter;
  bool await_resume() {
    typename lone_waiter<watch_receiver<T>>::ending wait_ends(*this);
    waiter::await_resume();
    return this->receiver().mark_seen();
  }

  static bool ready(void* context) noexcept {  // under the lock
    auto& receiver = *static_cast<watch_receiver<T>*>(context);
    return receiver.seen_ != receiver.state_->version || receiver.state_->closed;
  }
  static constexpr waiter::operations ops{&ready, nullptr};
};

}  // namespace detail

/// A reading half of a watch. Copyable (each copy tracks what it has seen). Throws
/// corio::invalid_channel when moved from.
///
///     auto [tx, rx] = corio::watch<int>(0);
///     while (co_await rx.changed()) {      // false once the sender is gone
///       apply(rx.borrow());
///     }
template <class T>
class watch_receiver {
 public:
  watch_receiver() noexcept = default;

  /// A copy of the latest value (does not mark it seen).
  [[nodiscard]] T borrow() const {
    detail::watch_state<T>& state = detail::checked(state_.get(), "watch_receiver::borrow");
    std::lock_guard guard(state.waiters.mutex());
    return state.value;
  }
  /// A copy of the latest value, marked seen.
  [[nodiscard]] T borrow_and_update() {
    detail::watch_state<T>& state = detail::checked(state_.get(), "watch_receiver::borrow_and_update");
    std::lock_guard guard(state.waiters.mutex());
    seen_ = state.version;
    return state.value;
  }
  /// True if a value newer than the last one seen is there.
  [[nodiscard]] bool has_changed() const {
    detail::watch_state<T>& state = detail::checked(state_.get(), "watch_receiver::has_changed");
    std::lock_guard guard(state.waiters.mutex());
    return seen_ != state.version;
  }

  /// `co_await rx.changed()` completes when a value newer than the last one seen is there (at once if
  /// it already is), marks it seen and yields true; yields false once the sender is gone with nothing
  /// newer. One changed() at a time per receiver object: a second one in flight throws
  /// std::logic_error. Resumes on the executor it suspended on; cancellation throws corio::cancelled and marks
  /// nothing seen. The operation is a copyable description that does nothing until awaited, so it
  /// may be passed to with_timeout or when_any (a user trial found neither compiled); the receiver
  /// must outlive it.
  [[nodiscard]] detail::wait_operation<detail::changed_awaiter<T>> changed() {
    detail::watch_state<T>& state = detail::checked(state_.get(), "watch_receiver::changed");
    return {&state.waiters, this, &detail::changed_awaiter<T>::ops};
  }

 private:
  friend class watch_sender<T>;
  friend class detail::changed_awaiter<T>;
  friend class detail::lone_waiter<watch_receiver>;
  static constexpr const char* wait_name = "corio::watch_receiver::changed";
  template <class U>
  friend std::pair<watch_sender<U>, watch_receiver<U>> watch(U initial);
  watch_receiver(std::shared_ptr<detail::watch_state<T>> state, std::uint64_t seen) noexcept
      : state_(std::move(state)), seen_(seen) {}

  bool mark_seen() noexcept {
    std::lock_guard guard(state_->waiters.mutex());
    if (seen_ == state_->version) {
      return false;  // woken by close with nothing newer
    }
    seen_ = state_->version;
    return true;
  }

  std::shared_ptr<detail::watch_state<T>> state_;
  std::uint64_t seen_ = 0;
  detail::lone_wait lone_;
};

template <class T>
watch_receiver<T> watch_sender<T>::subscribe() const {
  detail::watch_state<T>& state = detail::checked(state_.get(), "watch_sender::subscribe");
  std::lock_guard guard(state.waiters.mutex());
  return watch_receiver<T>(state_, state.version);
}

/// A connected watch starting at `initial` (which receivers have already seen).
template <class T>
[[nodiscard]] std::pair<watch_sender<T>, watch_receiver<T>> watch(T initial) {
  auto state = std::make_shared<detail::watch_state<T>>(std::move(initial));
  return {watch_sender<T>(state), watch_receiver<T>(state, 0)};
}

}  // namespace corio
