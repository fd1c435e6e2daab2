#pragma once
// corio::oneshot<T>: a channel for exactly one value, from one sender to one receiver (a reply slot).
//
// Design note. A oneshot is a channel<T> of capacity 1 with move-only handles, so it inherits that
// channel's protocol and tests (detail/channel_state.hpp, detail/chan_op.hpp): the value goes
// straight into a waiting receiver's frame, a receiver cancelled after it won the value gives it back,
// and the state is one allocation. The sender is spent by send(): dropping it closes the channel, so a
// receiver waiting for a sender that went away without sending wakes with nullopt.
// Threads: each handle may be used from any thread; it is not itself synchronised (one owner).
#include <optional>
#include <type_traits>
#include <utility>

#include <corio/channel.hpp>

namespace corio {

template <class T>
class oneshot_sender;
template <class T>
class oneshot_receiver;

/// The sending half of a oneshot. Move-only; send() may be called once. Dropping it unsent wakes the
/// receiver with nullopt.
template <class T>
class oneshot_sender {
 public:
  oneshot_sender() noexcept = default;
  oneshot_sender(oneshot_sender&&) noexcept = default;
  oneshot_sender& operator=(oneshot_sender&&) noexcept = default;

  /// Sends `value` without waiting. Returns false, with `value` untouched, if the receiver is gone.
  /// The sender is spent either way; a second send throws corio::invalid_channel.
  bool send(T&& value) {
    if (!tx_) {
      throw invalid_channel(
          "corio::oneshot_sender::send: the sender is spent (it already sent, or was moved from or "
          "default-constructed)");
    }
    sender<T> spent = std::move(tx_);
    return spent.try_send(std::move(value)) == channel_status::ok;
  }
  /// Sends a copy of `value`, as above.
  bool send(const T& value)
    requires std::is_copy_constructible_v<T>
  {
    T copy(value);
    return send(std::move(copy));
  }
  /// True if a send would not deliver: the receiver is gone, or this sender is spent (it sent
  /// already, or was moved from or default-constructed).
  bool is_closed() const { return !tx_ || tx_.is_closed(); }
  explicit operator bool() const noexcept { return static_cast<bool>(tx_); }

 private:
  template <class U>
  friend std::pair<oneshot_sender<U>, oneshot_receiver<U>> oneshot();
  explicit oneshot_sender(sender<T> tx) noexcept : tx_(std::move(tx)) {}
  sender<T> tx_;
};

/// The receiving half of a oneshot. Move-only. `co_await rx` (or `co_await rx.recv()`, which can also
/// be a select branch) yields the value, or nullopt if the sender was dropped without sending; a
/// receive after the value was received also yields nullopt (the channel is closed and empty, as a Go
/// receive from a closed channel; tokio's Receiver panics there). Resumes on the executor it
/// suspended on; cancellation throws corio::cancelled and keeps the value for a later receive.
///
///     auto [reply_tx, reply_rx] = corio::oneshot<int>();
///     corio::spawn(work(std::move(reply_tx)));     // work() calls reply_tx.send(42)
///     std::optional<int> answer = co_await reply_rx;
template <class T>
class oneshot_receiver {
 public:
  oneshot_receiver() noexcept = default;
  oneshot_receiver(oneshot_receiver&&) noexcept = default;
  oneshot_receiver& operator=(oneshot_receiver&&) noexcept = default;

  [[nodiscard]] recv_operation<T> recv() { return rx_.recv(); }
  detail::recv_awaiter<T> operator co_await() { return recv().operator co_await(); }
  /// Never suspends: ok with the value, empty (not sent yet) or closed (the sender is gone unsent,
  /// or the value was already received).
  [[nodiscard]] try_recv_result<T> try_recv() { return rx_.try_recv(); }
  explicit operator bool() const noexcept { return static_cast<bool>(rx_); }

 private:
  template <class U>
  friend std::pair<oneshot_sender<U>, oneshot_receiver<U>> oneshot();
  explicit oneshot_receiver(receiver<T> rx) noexcept : rx_(std::move(rx)) {}
  receiver<T> rx_;
};

/// A connected oneshot pair: one allocation, no allocation per use.
template <class T>
[[nodiscard]] std::pair<oneshot_sender<T>, oneshot_receiver<T>> oneshot() {
  auto [tx, rx] = channel<T>(1);
  return {oneshot_sender<T>(std::move(tx)), oneshot_receiver<T>(std::move(rx))};
}

}  // namespace corio
