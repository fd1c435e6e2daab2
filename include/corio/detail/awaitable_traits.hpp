#pragma once
// What `co_await x` yields, for any awaitable x (a type with operator co_await or the three methods).
#include <concepts>
#include <coroutine>
#include <type_traits>
#include <utility>

namespace corio::detail {

template <class A>
concept has_member_co_await = requires(A&& a) { std::forward<A>(a).operator co_await(); };

template <class A>
concept has_free_co_await = requires(A&& a) { operator co_await(std::forward<A>(a)); };

template <class A>
decltype(auto) get_awaiter(A&& awaitable) {
  if constexpr (has_member_co_await<A>) {
    return std::forward<A>(awaitable).operator co_await();
  } else if constexpr (has_free_co_await<A>) {
    return operator co_await(std::forward<A>(awaitable));
  } else {
    return std::forward<A>(awaitable);
  }
}

template <class A>
using awaiter_t = decltype(get_awaiter(std::declval<A>()));

template <class A>
using await_result_t = decltype(std::declval<awaiter_t<A>&>().await_resume());

}  // namespace corio::detail
