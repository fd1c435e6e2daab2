#pragma once
// corio::when_any: await several operations concurrently, keep the first to finish, cancel the rest.
#include <array>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
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

/// Each operand's own stop state (in `States`: a std::array for the variadic form, a
/// std::unique_ptr<stop_state[]> for the range form): requested for every operand but the first to
/// complete (combinator_state::operand_done), and for all by the awaiting task's own cancellation.
/// Own states, not one shared by all, so the winner takes its result under no stop: a stream read
/// that won keeps its bytes, one that lost gives them back to its stream (detail/read_stash.hpp).
using forwarding_callback = stop_callback<request_stop_of>;

template <class States, class Forwards>
class race_cancellation {
 public:
  race_cancellation(stop_state* outer, std::size_t count)
      : states_(make<States>(count)), forwards_(make<Forwards>(count)), count_(count) {
    if (outer != nullptr) {
      for (std::size_t i = 0; i < count_; ++i) {
        forwards_[i].emplace(*outer, request_stop_of{&states_[i], outer});
      }
    }
  }
  race_cancellation(const race_cancellation&) = delete;
  race_cancellation& operator=(const race_cancellation&) = delete;
  std::span<stop_state> operands() noexcept { return {&states_[0], count_}; }

 private:
  // Storage for `count` elements: a std::array as it is, a std::unique_ptr<T[]> allocated.
  template <class Storage>
  static Storage make(std::size_t count) {
    if constexpr (requires { typename Storage::element_type; }) {
      return std::make_unique<typename Storage::element_type[]>(count);
    } else {
      return Storage{};
    }
  }

  States states_;      // declared first, destroyed last: the forwarding callbacks point at them
  Forwards forwards_;
  std::size_t count_;
};

template <std::size_t N>
using fixed_race = race_cancellation<std::array<stop_state, N>, std::array<std::optional<forwarding_callback>, N>>;
using sized_race =
    race_cancellation<std::unique_ptr<stop_state[]>, std::unique_ptr<std::optional<forwarding_callback>[]>>;

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
/// (tcp_stream::read_some); a channel recv that lost may still have taken its value (select is the
/// race for channels). Resumes on the thread where the last operand stopped.
///
///     auto first = co_await corio::when_any(read_reply(), corio::sleep_for(1s));
///     if (first.index() == 1) { /* timed out */ }
template <class... Awaitables>
task<std::variant<detail::non_void_t<detail::await_result_t<Awaitables>>...>> when_any(Awaitables... awaitables) {
  static_assert(sizeof...(Awaitables) > 0, "corio::when_any needs at least one operand");
  using result_type = std::variant<detail::non_void_t<detail::await_result_t<Awaitables>>...>;
  constexpr std::size_t count = sizeof...(Awaitables);
  detail::stop_state* outer = co_await detail::current_stop_token{};
  detail::fixed_race<count> cancellation(outer, count);
  detail::combinator_state join;
  join.operand_stops = cancellation.operands();
  std::tuple children{detail::make_join_child(std::move(awaitables))...};
  co_await detail::join_all_awaiter{join, count, [&](const detail::promise_base* parent) {
    std::size_t index = 0;
    std::apply([&](auto&... child) { ((child.start(join, index, &join.operand_stops[index], parent), ++index), ...); },
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
  detail::sized_race cancellation(outer, count);
  detail::combinator_state join;
  join.operand_stops = cancellation.operands();
  std::vector<detail::join_child<T>> children;
  children.reserve(tasks.size());
  for (task<T>& each : tasks) {
    children.push_back(detail::make_join_child(std::move(each)));
  }
  co_await detail::join_all_awaiter{join, children.size(), [&](const detail::promise_base* parent) {
    for (std::size_t i = 0; i < children.size(); ++i) {
      children[i].start(join, i, &join.operand_stops[i], parent);
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
