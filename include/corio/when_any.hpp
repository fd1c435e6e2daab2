#pragma once
// corio::when_any: await several operations concurrently, keep the first to finish, cancel the rest.
#include <array>
#include <cstddef>
#include <memory>
#include <numeric>
#include <optional>
#include <span>
#include <stdexcept>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <corio/detail/join_child.hpp>
#include <corio/detail/random.hpp>
#include <corio/detail/stop_state.hpp>
#include <corio/task.hpp>

namespace corio {

/// The outcome of the range form of when_any: which task finished first, and its value.
template <class T>
struct when_any_result {
  std::size_t index;
  T value;
};

namespace detail {

/// Fills `order` with the positions 0..n-1 in the order when_any starts its operands: shuffled (fair:
/// of the operands that finish as they start, each is equally likely to start first among them), or
/// as given (biased).
template <bool Biased>
void start_order(std::span<std::size_t> order) noexcept {
  std::iota(order.begin(), order.end(), std::size_t{0});
  if constexpr (!Biased) {
    shuffle(order);
  }
}

template <bool Biased, class... Awaitables>
task<std::variant<non_void_t<await_result_t<Awaitables>>...>> race(Awaitables... awaitables) {
  static_assert(sizeof...(Awaitables) > 0, "corio::when_any needs at least one operand");
  using result_type = std::variant<non_void_t<await_result_t<Awaitables>>...>;
  constexpr std::size_t count = sizeof...(Awaitables);
  stop_state* outer = co_await current_stop_token{};
  std::array<operand_stop, count> stops;  // declared before the children: outlives them
  for (operand_stop& stop : stops) {
    stop.follow(outer);
  }
  combinator_state join;
  join.operand_stops = stops;
  std::tuple children{make_join_child(std::move(awaitables))...};
  std::array<std::size_t, count> order;
  start_order<Biased>(order);
  co_await join_all_awaiter{join, count, [&](const promise_base* parent) {
    for (std::size_t index : order) {
      [&]<std::size_t... I>(std::index_sequence<I...>) {
        (void)((I == index ? (std::get<I>(children).start(join, I, &stops[I].state, parent), true) : false) || ...);
      }(std::index_sequence_for<Awaitables...>{});
    }
  }};
  std::size_t winner = join.first_done.load(std::memory_order_acquire);
  std::optional<result_type> result;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (void)((I == winner ? (result.emplace(std::in_place_index<I>, take_non_void(std::get<I>(children).result())),
                           true)
                        : false) ||
           ...);
  }(std::index_sequence_for<Awaitables...>{});
  co_return std::move(*result);
}

template <bool Biased, class T>
task<std::conditional_t<std::is_void_v<T>, std::size_t, when_any_result<T>>> race(std::vector<task<T>> tasks) {
  if (tasks.empty()) {
    throw std::invalid_argument("corio::when_any: no tasks to wait for");
  }
  const std::size_t count = tasks.size();
  stop_state* outer = co_await current_stop_token{};
  auto stops = std::make_unique<operand_stop[]>(count);  // declared before the children: outlives them
  for (std::size_t i = 0; i < count; ++i) {
    stops[i].follow(outer);
  }
  combinator_state join;
  join.operand_stops = {stops.get(), count};
  std::vector<join_child<T>> children;
  children.reserve(count);
  for (task<T>& each : tasks) {
    children.push_back(make_join_child(std::move(each)));
  }
  std::vector<std::size_t> order(count);
  start_order<Biased>(order);
  co_await join_all_awaiter{join, count, [&](const promise_base* parent) {
    for (std::size_t index : order) {
      children[index].start(join, index, &stops[index].state, parent);
    }
  }};
  std::size_t winner = join.first_done.load(std::memory_order_acquire);
  if constexpr (std::is_void_v<T>) {
    children[winner].result().take();
    co_return winner;
  } else {
    co_return when_any_result<T>{winner, children[winner].result().take()};
  }
}

}  // namespace detail

/// Starts every awaitable and completes with the result of the first to finish, as a variant whose
/// index() is the winner's position (`void` becomes std::monostate). As soon as one finishes the
/// others are cancelled (they see corio::cancelled at their next suspension point), and when_any
/// completes once all have stopped, so no operand outlives it. If the winner failed, its exception is
/// rethrown; the losers' outcomes are discarded. A loser that completed anyway takes its result
/// under a requested stop, so a stream read that lost keeps its bytes for the stream's next read
/// (tcp_stream::read_some), and a channel recv that lost gives its value back (receiver::recv says
/// when it cannot). Resumes on the thread where the last operand stopped.
/// Fairness: one that finishes as it starts wins before the operands after it have started, so the
/// operands start in a fresh random order each time (as Go's select polls its ready branches): when
/// several could finish at once, each is equally likely to win, and in a loop none starves the others
/// (`when_any(stream.read_some(buf), rx.recv())` under constant input still takes from `rx`).
/// when_any_biased starts them in the order given instead.
///
///     auto first = co_await corio::when_any(read_reply(), corio::sleep_for(1s));
///     if (first.index() == 1) { /* timed out */ }
template <class... Awaitables>
task<std::variant<detail::non_void_t<detail::await_result_t<Awaitables>>...>> when_any(Awaitables... awaitables) {
  return detail::race<false>(std::move(awaitables)...);
}

/// when_any with the operands started in the order given (tokio's select! with `biased;`): of the
/// operands that finish as they start (an event already set, a channel with a value waiting, a
/// passed deadline), the earliest listed wins. Operands that become ready while it waits win in
/// the order they resume, which need not be the order given: each is its own coroutine, and on a
/// runtime the one woken last often runs first (tokio polls every branch of its select! in one
/// task). So a shutdown signal listed first wins whenever it is set before when_any_biased starts,
/// as it is on the next turn of a loop, and otherwise races a message that arrives in the same
/// instant. In a loop, an operand that is always ready starves those after it.
template <class... Awaitables>
task<std::variant<detail::non_void_t<detail::await_result_t<Awaitables>>...>> when_any_biased(
    Awaitables... awaitables) {
  return detail::race<true>(std::move(awaitables)...);
}

/// Range form: the first of `tasks` to finish, with its index; the others are cancelled and awaited
/// as above, started in a random order. `when_any` of `task<void>`s yields just the index. Throws
/// std::invalid_argument for an empty vector.
template <class T>
task<std::conditional_t<std::is_void_v<T>, std::size_t, when_any_result<T>>> when_any(std::vector<task<T>> tasks) {
  return detail::race<false>(std::move(tasks));
}

/// Range form of when_any_biased: `tasks` start in order.
template <class T>
task<std::conditional_t<std::is_void_v<T>, std::size_t, when_any_result<T>>> when_any_biased(
    std::vector<task<T>> tasks) {
  return detail::race<true>(std::move(tasks));
}

}  // namespace corio
