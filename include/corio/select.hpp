#pragma once
// corio::select: wait for the first of several channel operations (any mix of recv and send on any
// channels), with an optional timeout branch and an optional default branch.
//
// Design note. A select is one chan_waiter (detail/chan_waiter.hpp, which holds the protocol and its
// invariants) with one node per channel branch, all living in this awaiter, so in the awaiting frame:
// no allocation, no frame or stop callback per branch (that is what building it on when_any would
// cost, besides losing the values that losing branches had received). Exactly one branch completes:
// every other node was never given a value or a slot, because a waker must claim the shared decision
// word before touching a node. The timeout branch is a timer in this awaiter whose callback claims
// the decision like any waker; the default branch wins in pass 1 when no channel branch is ready.
// Fairness: select polls the ready branches in a fresh random order each time (like Go), so no
// ready branch is favoured; select_biased polls them in argument order (tokio's `biased;`).
// Threads: as for the channels; a select with a timeout must be awaited on an event loop or runtime.
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>

#include <corio/channel.hpp>
#include <corio/detail/chan_waiter.hpp>
#include <corio/detail/deadline.hpp>
#include <corio/detail/promise_base.hpp>
#include <corio/detail/timer_queue.hpp>

namespace corio {

/// What a select's timeout branch yields when it wins.
struct select_timeout {};
/// What a select's default branch yields when it wins (no other branch was ready).
struct select_default {};

namespace detail {

struct timeout_branch {
  timer_queue::clock::time_point deadline;
};
struct default_branch {};

template <class Branch>
struct select_branch;  // per kind: storage in the awaiter, the node (if any) and the result

template <class Branch>
struct with_index {
  Branch& branch;
  std::uint32_t index;
};

template <class T>
struct select_branch<recv_operation<T>> {
  using result_type = std::optional<T>;
  static constexpr bool has_node = true;
  select_branch(with_index<recv_operation<T>> b) noexcept  // NOLINT: built in place by std::tuple
      : node(&b.branch.state(), channel_state<T>::recv_ops, &slot, b.index) {}
  result_type take() noexcept { return std::move(slot); }
  std::optional<T> slot;
  chan_node node;
};

template <class T>
struct select_branch<send_operation<T>> {
  using result_type = send_result;
  static constexpr bool has_node = true;
  select_branch(with_index<send_operation<T>> b) noexcept  // NOLINT
      : copy(std::move(b.branch.copy())),
        node(&b.branch.state(), channel_state<T>::send_ops, copy ? &*copy : b.branch.source(), b.index) {}
  result_type take() noexcept { return send_result(node.ok_); }
  std::optional<T> copy;
  chan_node node;
};

template <>
struct select_branch<timeout_branch> {
  using result_type = select_timeout;
  static constexpr bool has_node = false;
  select_branch(with_index<timeout_branch> b) noexcept : timer(b.branch.deadline) {}  // NOLINT
  result_type take() noexcept { return {}; }
  chan_timer timer;
};

template <>
struct select_branch<default_branch> {
  using result_type = select_default;
  static constexpr bool has_node = false;
  select_branch(with_index<default_branch>) noexcept {}  // NOLINT
  result_type take() noexcept { return {}; }
};

// A channel branch that takes part only if `enabled` (corio::only_if): a disabled one is left out of
// the waiter's nodes, so it is never polled, never parked on and never wins.
template <class Branch>
struct only_if_branch {
  Branch branch;
  bool enabled;
};

template <class Branch>
struct select_branch<only_if_branch<Branch>> : select_branch<Branch> {
  select_branch(with_index<only_if_branch<Branch>> b) noexcept  // NOLINT
      : select_branch<Branch>(with_index<Branch>{b.branch.branch, b.index}), enabled(b.branch.enabled) {}
  bool enabled;
};

template <class Branch>
concept select_branch_kind = requires { typename select_branch<Branch>::result_type; };

// A send branch whose operation was awaited or moved from already holds no value: refused when the
// select is made, before any branch is polled.
template <class Branch>
void require_unspent(const Branch&) noexcept {}
template <class T>
void require_unspent(const send_operation<T>& operation) {
  if (operation.spent()) {
    throw invalid_channel("corio::select: a send branch whose operation was awaited or moved from already");
  }
}
template <class Branch>
void require_unspent(const only_if_branch<Branch>& conditional) {
  require_unspent(conditional.branch);
}

template <class Branch>
inline constexpr bool is_channel_operation = false;
template <class T>
inline constexpr bool is_channel_operation<recv_operation<T>> = true;
template <class T>
inline constexpr bool is_channel_operation<send_operation<T>> = true;

// Calls `f` with the channel state of a channel branch (a select's own count on it: channel_state.hpp,
// "Lifetime"); nothing for the other kinds.
template <class Branch, class F>
void with_channel(Branch&, F) noexcept {}
template <class T, class F>
void with_channel(recv_operation<T>& operation, F f) noexcept {
  f(operation.state());
}
template <class T, class F>
void with_channel(send_operation<T>& operation, F f) noexcept {
  f(operation.state());
}
template <class Branch, class F>
void with_channel(only_if_branch<Branch>& conditional, F f) noexcept {
  with_channel(conditional.branch, f);
}

template <bool Biased, class... Branches>
class select_awaiter {
  static constexpr std::size_t node_count = (std::size_t{select_branch<Branches>::has_node} + ...);

 public:
  using result_type = std::variant<typename select_branch<Branches>::result_type...>;

  explicit select_awaiter(std::tuple<Branches...>& branches)
      : branches_(make_branches(branches, std::index_sequence_for<Branches...>{})),
        enabled_nodes_(collect_nodes()),
        waiter_(nodes_.data(), enabled_nodes_, shape()) {}
  select_awaiter(const select_awaiter&) = delete;
  select_awaiter& operator=(const select_awaiter&) = delete;

  bool await_ready() const noexcept { return false; }
  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> self) {
    return waiter_.suspend(self, stop_token_of(self));
  }
  result_type await_resume() {
    std::uint32_t winner = waiter_.finish();
    return take(winner, std::index_sequence_for<Branches...>{});
  }

 private:
  template <std::size_t... I>
  static std::tuple<select_branch<Branches>...> make_branches(std::tuple<Branches...>& branches,
                                                              std::index_sequence<I...>) {
    return std::tuple<select_branch<Branches>...>(
        with_index<Branches>{std::get<I>(branches), static_cast<std::uint32_t>(I)}...);
  }

  // Fills nodes_ with the nodes of the enabled channel branches; returns how many.
  std::size_t collect_nodes() noexcept {
    std::size_t next = 0;
    std::apply(
        [&](auto&... branch) {
          (
              [&](auto& b) {
                if constexpr (std::remove_reference_t<decltype(b)>::has_node) {
                  if constexpr (requires { b.enabled; }) {
                    if (!b.enabled) {
                      return;
                    }
                  }
                  nodes_[next++] = &b.node;
                }
              }(branch),
              ...);
        },
        branches_);
    return next;
  }

  select_shape shape() noexcept {
    select_shape result;
    result.biased = Biased;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (
          [&] {
            using branch = std::tuple_element_t<I, std::tuple<Branches...>>;
            if constexpr (std::is_same_v<branch, timeout_branch>) {
              result.timeout_branch = I;
              result.timer = &std::get<I>(branches_).timer;
            } else if constexpr (std::is_same_v<branch, default_branch>) {
              result.default_branch = I;
            }
          }(),
          ...);
    }(std::index_sequence_for<Branches...>{});
    return result;
  }

  template <std::size_t... I>
  result_type take(std::uint32_t winner, std::index_sequence<I...>) {
    std::optional<result_type> result;
    (void)((I == winner ? (result.emplace(std::in_place_index<I>, std::get<I>(branches_).take()), true) : false) ||
           ...);
    return std::move(*result);
  }

  std::tuple<select_branch<Branches>...> branches_;
  std::array<chan_node*, node_count> nodes_{};
  std::size_t enabled_nodes_;
  chan_waiter waiter_;  // last: destroyed first, while the nodes and slots it may give back exist
};

template <bool Biased, class... Branches>
class select_operation {
 public:
  explicit select_operation(Branches... branches) : branches_((require_unspent(branches), std::move(branches))...) {
    std::apply([](auto&... branch) { (with_channel(branch, [](auto& state) { state.retain(); }), ...); }, branches_);
  }
  /// Move-only: the counts on the channels move with it.
  select_operation(select_operation&& other) noexcept
      : branches_(std::move(other.branches_)), awaited_(other.awaited_), holds_channels_(std::exchange(other.holds_channels_, false)) {}
  select_operation& operator=(select_operation&&) = delete;
  ~select_operation() {
    if (holds_channels_) {
      std::apply([](auto&... branch) { (with_channel(branch, [](auto& state) { state.drop_retained(); }), ...); },
                 branches_);
    }
  }
  /// Once: a second `co_await` of the same select (whose send branches' values have gone) throws
  /// corio::invalid_channel.
  select_awaiter<Biased, Branches...> operator co_await() && {
    if (std::exchange(awaited_, true)) {
      throw invalid_channel("corio::select: this select was awaited already; make one per wait");
    }
    return select_awaiter<Biased, Branches...>(branches_);
  }

 private:
  std::tuple<Branches...> branches_;
  bool awaited_ = false;
  bool holds_channels_ = true;
};

template <class... Branches>
constexpr void check_select_branches() {
  static_assert((select_branch_kind<Branches> && ...),
                "corio::select: each branch must be rx.recv(), tx.send(v), corio::only_if(c, branch), "
                "corio::after(d) or corio::otherwise()");
  static_assert((std::size_t{std::is_same_v<Branches, timeout_branch>} + ...) <= 1,
                "corio::select: at most one timeout branch");
  static_assert((std::size_t{std::is_same_v<Branches, default_branch>} + ...) <= 1,
                "corio::select: at most one default branch");
  static_assert(sizeof...(Branches) <= chan_waiter::max_branches, "corio::select: too many branches");
}

}  // namespace detail

/// A select branch that wins when `duration` has passed (measured from this call) and no other
/// branch completed first; it yields corio::select_timeout.
template <class Rep, class Period>
[[nodiscard]] detail::timeout_branch after(std::chrono::duration<Rep, Period> duration) {
  return {detail::deadline_after<detail::timer_queue::clock>(duration)};
}

/// A select branch that wins at once when no channel branch is ready (Go's `default:`): the select
/// never suspends. It yields corio::select_default.
[[nodiscard]] inline detail::default_branch otherwise() noexcept { return {}; }

/// A channel branch (rx.recv() or tx.send(v)) that takes part in its select only if `enabled`: a
/// disabled branch is never polled and never wins (tokio's `branch, if cond`; Go's nil channel), so a
/// loop can drop the branch of a channel it found closed. A select whose branches are all disabled
/// waits for its timeout or default branch, or, with neither, until it is cancelled (as Go's does).
///
///     auto r = co_await corio::select(corio::only_if(a_open, a.recv()), corio::only_if(b_open, b.recv()));
template <class Branch>
  requires detail::is_channel_operation<Branch>
[[nodiscard]] detail::only_if_branch<Branch> only_if(bool enabled, Branch branch) {
  return {std::move(branch), enabled};
}

/// `co_await corio::select(branches...)` waits until one branch can complete, completes exactly
/// that one, and yields a std::variant whose index() is the winning branch's position and whose
/// alternative is that branch's result: std::optional<T> for rx.recv() (nullopt: closed and drained),
/// send_result for tx.send(v) (false: closed, v untouched), select_timeout for corio::after(d),
/// select_default for corio::otherwise(). A losing branch consumes nothing and sends nothing (its
/// value stays with the caller). Among branches ready at once, the winner is chosen at random.
/// Resumes on the executor it suspended on. If the task is cancelled while it waits, throws
/// corio::cancelled (a value a recv branch had just won goes back to its channel; a send that had
/// already delivered, or a recv that won a value from a channel another receiver has since seen
/// closed and drained, reports its success
/// instead, and the next cancellation point throws). A select with no branches does not compile.
///
///     auto r = co_await corio::select(jobs.recv(), results.send(std::move(done)), corio::after(100ms));
///     switch (r.index()) {
///       case 0: if (auto& job = std::get<0>(r)) run(*job); break;   // a job, or nullopt: closed
///       case 1: /* `done` was delivered if std::get<1>(r), else untouched */ break;
///       case 2: /* 100 ms passed with nothing ready */ break;
///     }
template <class... Branches>
  requires(sizeof...(Branches) > 0)
[[nodiscard]] detail::select_operation<false, Branches...> select(Branches... branches) {
  detail::check_select_branches<Branches...>();
  return detail::select_operation<false, Branches...>(std::move(branches)...);
}

/// Like select, but tries ready branches in argument order: the first ready one wins (tokio's
/// `biased;`). That order applies to the branches ready when it starts; once it waits, the first
/// channel operation (or timeout) to reach it wins. Use it to give one channel priority, knowing that
/// it can starve the others.
template <class... Branches>
  requires(sizeof...(Branches) > 0)
[[nodiscard]] detail::select_operation<true, Branches...> select_biased(Branches... branches) {
  detail::check_select_branches<Branches...>();
  return detail::select_operation<true, Branches...>(std::move(branches)...);
}

}  // namespace corio
