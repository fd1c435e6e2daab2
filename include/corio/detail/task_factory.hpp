#pragma once
// detail::task_factory and detail::invoke_keeping: what every spawn that takes a callable shares
// (corio::spawn, runtime, event_loop, task_scope, join_set).
#include <concepts>
#include <functional>
#include <type_traits>

#include <corio/task.hpp>

namespace corio::detail {

template <class T>
struct is_task : std::false_type {};
template <class T>
struct is_task<task<T>> : std::true_type {};

/// A callable that returns a corio::task when called with no arguments (a capturing lambda coroutine).
template <class F>
concept task_factory = !is_task<std::remove_cvref_t<F>>::value && std::invocable<std::decay_t<F>&> &&
                       is_task<std::invoke_result_t<std::decay_t<F>&>>::value;

/// Calls `make` from inside a coroutine frame that owns it, so the task it returns may keep referring
/// to the callable (a lambda's captures) for as long as it runs: the classic dangling-closure pitfall
/// of C++ coroutines, closed for every spawn that takes a callable (folly's co_invoke).
template <class F>
std::invoke_result_t<F&> invoke_keeping(F make) {
  co_return co_await std::invoke(make);
}

}  // namespace corio::detail
