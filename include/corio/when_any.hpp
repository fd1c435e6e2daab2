#pragma once
// corio::when_any: await several operations concurrently, keep the first to finish, cancel the rest.
#include <array>
#include <cstddef>
#include <memory>
#include <optional>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include <corio/detail/join_child.hpp>
#include <corio/detail/stop_state.hpp>
#include <corio/task.hpp>

namespace corio {
namespace detail {

/// `co_await current_stop_token{}` yields the awaiting task's cancellation token (or null) without
/// suspending.
struct current_stop_token {
  stop_state* token_ = nullptr;
  bool await_ready() const noexcept { return false; }
  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> self) noexcept {
    token_ = stop_token_of(self);
    return false;
  }
  stop_state* await_resume() const noexcept { return token_; }
};

}  // namespace detail

/// The outcome of the range form of when_any: which task finished first, and its value.
template <class T>
struct when_any_result {
  std::size_t index;
  T value;
};

/// Starts every awaitable and completes with the result of the first to finish, as a variant whose
/// index() is the winner's position (`void` becomes std::monostate). As soon as one finishes the
/// others are cancelled (they see corio::cancelled at their next suspension point), and when_any
/// completes once all have stopped, so no operand outlives it. If the winner failed, its exception is
/// rethrown; the losers' outcomes are discarded. A loser that completed anyway takes its result
/// under a requested stop, so a stream read that lost keeps its bytes for the stream's next read
/// (tcp_stream::read_some), and a channel recv that lost gives its value back (receiver::recv says
/// when it cannot). Resumes on the thread where the last operand stopped.
///
///     auto first = co_await corio::when_any(read_reply(), corio::sleep_for(1s));
///     if (first.index() == 1) { /* timed out */ }
template <class... Awaitables>
task<std::variant<detail::non_void_t<detail::await_result_t<Awaitables>>...>> when_any(Awaitables... awaitables) {
  static_assert(sizeof...(Awaitables) > 0, "corio::when_any needs at least one operand");
  using result_type = std::variant<detail::non_void_t<detail::await_result_t<Awaitables>>...>;
  constexpr std::size_t count = sizeof...(Awaitables);
  detail::stop_state* outer = co_await detail::current_stop_token{};
  std::array<detail::operand_stop, count> stops;  // declared before the children: outlives them
  for (detail::operand_stop& stop : stops) {
    stop.follow(outer);
  }
  detail::combinator_state join;
  join.operand_stops = stops;
  std::tuple children{detail::make_join_child(std::move(awaitables))...};
  co_await detail::join_all_awaiter{join, count, [&](const detail::promise_base* parent) {
    std::size_t index = 0;
    std::apply([&](auto&... child) { ((child.start(join, index, &stops[index].state, parent), ++index), ...); },
               children);
  }};
  std::size_t winner = join.first_done.load(std::memory_order_acquire);
  std::optional<result_type> result;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (void)((I == winner ? (result.emplace(std::in_place_index<I>, detail::take_non_void(std::get<I>(children).result())),
                           true)
                        : false) ||
           ...);
  }(std::index_sequence_for<Awaitables...>{});
  co_return std::move(*result);
}

/// Range form: the first of `tasks` to finish, with its index; the others are cancelled and awaited
/// as above. `when_any` of `task<void>`s yields just the index. Throws std::invalid_argument for an
/// empty vector.
template <class T>
task<std::conditional_t<std::is_void_v<T>, std::size_t, when_any_result<T>>> when_any(std::vector<task<T>> tasks) {
  if (tasks.empty()) {
    throw std::invalid_argument("corio::when_any: no tasks to wait for");
  }
  const std::size_t count = tasks.size();
  detail::stop_state* outer = co_await detail::current_stop_token{};
  auto stops = std::make_unique<detail::operand_stop[]>(count);  // declared before the children: outlives them
  for (std::size_t i = 0; i < count; ++i) {
    stops[i].follow(outer);
  }
  detail::combinator_state join;
  join.operand_stops = {stops.get(), count};
  std::vector<detail::join_child<T>> children;
  children.reserve(tasks.size());
  for (task<T>& each : tasks) {
    children.push_back(detail::make_join_child(std::move(each)));
  }
  co_await detail::join_all_awaiter{join, children.size(), [&](const detail::promise_base* parent) {
    for (std::size_t i = 0; i < children.size(); ++i) {
      children[i].start(join, i, &stops[i].state, parent);
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

}  // namespace corio
