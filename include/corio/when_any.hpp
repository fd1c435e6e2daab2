#pragma once
// corio::when_any: await several operations concurrently, keep the first to finish, cancel the rest.
#include <cstddef>
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

/// The operands' stop source: requested by the first operand to finish, and by the awaiting task's
/// own cancellation.
class race_cancellation {
 public:
  explicit race_cancellation(stop_state* outer) {
    if (outer != nullptr) {
      forward_.emplace(*outer, request_stop_of{&source_});
    }
  }
  race_cancellation(const race_cancellation&) = delete;
  race_cancellation& operator=(const race_cancellation&) = delete;
  stop_state& source() noexcept { return source_; }
  stop_state* token() noexcept { return &source_; }

 private:
  stop_state source_;  // declared first, destroyed last: the forwarding callback points at it
  std::optional<stop_callback<request_stop_of>> forward_;
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
/// rethrown; the losers' outcomes are discarded. Resumes on the thread where the last operand stopped.
///
///     auto first = co_await corio::when_any(read_reply(), corio::sleep_for(1s));
///     if (first.index() == 1) { /* timed out */ }
template <class... Awaitables>
task<std::variant<detail::non_void_t<detail::await_result_t<Awaitables>>...>> when_any(Awaitables... awaitables) {
  static_assert(sizeof...(Awaitables) > 0, "corio::when_any needs at least one operand");
  using result_type = std::variant<detail::non_void_t<detail::await_result_t<Awaitables>>...>;
  detail::race_cancellation cancellation(co_await detail::current_stop_token{});
  detail::combinator_state join;
  join.cancel_on_first = &cancellation.source();
  std::tuple children{detail::make_join_child(std::move(awaitables))...};
  co_await detail::join_all_awaiter{join, sizeof...(Awaitables), [&](const detail::promise_base* parent) {
    std::size_t index = 0;
    std::apply([&](auto&... child) { (child.start(join, index++, cancellation.token(), parent), ...); }, children);
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
  detail::race_cancellation cancellation(co_await detail::current_stop_token{});
  detail::combinator_state join;
  join.cancel_on_first = &cancellation.source();
  std::vector<detail::join_child<T>> children;
  children.reserve(tasks.size());
  for (task<T>& each : tasks) {
    children.push_back(detail::make_join_child(std::move(each)));
  }
  co_await detail::join_all_awaiter{join, children.size(), [&](const detail::promise_base* parent) {
    for (std::size_t i = 0; i < children.size(); ++i) {
      children[i].start(join, i, cancellation.token(), parent);
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
