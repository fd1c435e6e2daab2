#pragma once
// corio::when_all: await several operations concurrently and collect every result.
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <corio/detail/join_child.hpp>
#include <corio/detail/stop_state.hpp>
#include <corio/task.hpp>

namespace corio {

/// Starts every awaitable (in argument order, each running until its first suspension) and completes
/// when all have finished, with a tuple of their results (`void` becomes std::monostate). Resumes on
/// the thread where the last operand finished. The first operand to fail stops the others: each ends
/// with corio::cancelled at its next cancellation point instead of running on for a result that would
/// be dropped (tokio's try_join!, Go's errgroup.WithContext), and once all have finished, the first
/// failure is rethrown. Cancellation of the awaiting task reaches every operand. A failure or a
/// cancellation drops the results of the operands that did finish, a value a channel recv had already
/// taken included (use select where a received value must not be lost).
///
///     auto [a, b] = co_await corio::when_all(fetch_a(), fetch_b());
template <class... Awaitables>
task<std::tuple<detail::non_void_t<detail::await_result_t<Awaitables>>...>> when_all(Awaitables... awaitables) {
  detail::operand_stop stop;  // declared before the children: outlives them
  stop.follow(co_await detail::current_stop_token{});
  detail::combinator_state join;
  join.stop_on_failure = &stop.state;
  std::tuple children{detail::make_join_child(std::move(awaitables))...};
  co_await detail::join_all_awaiter{join, sizeof...(Awaitables), [&](const detail::promise_base* parent) {
    std::size_t index = 0;
    std::apply([&](auto&... child) { (child.start(join, index++, &stop.state, parent), ...); }, children);
  }};
  if (std::size_t failed = join.first_failed.load(std::memory_order_relaxed); failed != join.none) {
    std::size_t index = 0;
    std::apply([&](auto&... child) { ((index++ == failed ? (void)child.result().take() : void()), ...); }, children);
  }
  co_return std::apply([](auto&... child) { return std::tuple{detail::take_non_void(child.result())...}; },
                       children);
}

/// Range form: awaits every task of `tasks` concurrently; completes with their results in order
/// (nothing for `task<void>`). Failures as in the variadic form: the first stops the others and is
/// rethrown once all have finished.
template <class T>
task<std::conditional_t<std::is_void_v<T>, void, std::vector<detail::non_void_t<T>>>> when_all(
    std::vector<task<T>> tasks) {
  detail::operand_stop stop;  // declared before the children: outlives them
  stop.follow(co_await detail::current_stop_token{});
  detail::combinator_state join;
  join.stop_on_failure = &stop.state;
  std::vector<detail::join_child<T>> children;
  children.reserve(tasks.size());
  for (task<T>& each : tasks) {
    children.push_back(detail::make_join_child(std::move(each)));
  }
  co_await detail::join_all_awaiter{join, children.size(), [&](const detail::promise_base* parent) {
    for (std::size_t i = 0; i < children.size(); ++i) {
      children[i].start(join, i, &stop.state, parent);
    }
  }};
  if (std::size_t failed = join.first_failed.load(std::memory_order_relaxed); failed != join.none) {
    children[failed].result().take();
  }
  if constexpr (std::is_void_v<T>) {
    for (auto& child : children) {
      child.result().take();
    }
  } else {
    std::vector<detail::non_void_t<T>> results;
    results.reserve(children.size());
    for (auto& child : children) {
      results.push_back(child.result().take());
    }
    co_return results;
  }
}

}  // namespace corio
