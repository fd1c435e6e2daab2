#pragma once
// Asking whether the current task was cancelled, shielding cleanup from cancellation, and bridging a
// std::stop_token the caller already has.
#include <optional>
#include <stop_token>
#include <utility>

#include <corio/detail/awaitable_traits.hpp>
#include <corio/detail/promise_base.hpp>
#include <corio/detail/stop_state.hpp>
#include <corio/task.hpp>

namespace corio {
namespace detail {

struct cancellation_query {
  bool requested_ = false;
  bool await_ready() const noexcept { return false; }
  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> self) noexcept {
    stop_state* stop = stop_token_of(self);
    requested_ = stop != nullptr && stop->stop_requested();
    return false;
  }
  bool await_resume() const noexcept { return requested_; }
};

template <class Awaitable>
task<await_result_t<Awaitable>> as_task(Awaitable awaitable) {
  co_return co_await std::move(awaitable);
}

}  // namespace detail

/// `co_await corio::cancellation_requested()` is true once the calling task's cancellation was
/// requested. It never suspends and never throws (it is not a cancellation point), so a long
/// computation between awaits can poll it and stop early. Loop-local; any executor or thread.
///
///     while (!co_await corio::cancellation_requested()) { crunch_a_little(); co_await corio::yield(); }
[[nodiscard]] inline detail::cancellation_query cancellation_requested() noexcept { return {}; }

/// Runs `body` so that the awaiting task's cancellation does not reach it: its awaits complete
/// normally even after the task was cancelled (Kotlin's withContext(NonCancellable)). For cleanup that
/// must finish: flushing, releasing a remote lock, a goodbye message. The awaiting task sees its
/// cancellation again at its next suspension point after the shielded part. Keep shielded work short:
/// a runtime's shutdown lets it run, whatever it waits for (a socket, a timer, a channel), until every
/// task has finished or the 1 s grace period has passed, then destroys it like anything else (an
/// event loop's destructor runs nothing: it destroys it at once).
///
///     bool stopped = false;
///     try { co_await serve(conn); } catch (const corio::cancelled&) { stopped = true; }
///     if (stopped) { co_await corio::shield(say_goodbye(conn)); throw corio::cancelled(); }
template <class T>
task<T> shield(task<T> body) {
  if (!body.valid()) {
    throw invalid_task("corio::shield: empty, finished or already awaited task");
  }
  auto handle = body.release();
  handle.promise().stop_ = &detail::never_stops;
  return task<T>{handle};
}

/// The same for any other awaitable (a sync primitive's wait, a sleep, a join): it runs inside a
/// shielded task.
template <class Awaitable>
task<detail::await_result_t<Awaitable>> shield(Awaitable awaitable) {
  return shield(detail::as_task(std::move(awaitable)));
}

/// Runs `body` so that it is cancelled when either `token` (a std::stop_token the caller already has,
/// say from a std::jthread) or the awaiting task's own cancellation is requested. A body that already
/// has its own cancellation keeps it, as everywhere a task starts: `with_stop_token(t, shield(x))`
/// stays shielded, from `t` too.
///
///     std::jthread t([&](std::stop_token st) { corio::sync_wait(corio::with_stop_token(st, serve())); });
template <class T>
task<T> with_stop_token(std::stop_token token, task<T> body) {
  if (!body.valid()) {
    throw invalid_task("corio::with_stop_token: empty, finished or already awaited task");
  }
  auto handle = body.release();
  if (handle.promise().stop_ != nullptr) {
    co_return co_await task<T>{handle};
  }
  detail::stop_state* outer = co_await detail::current_stop_token{};
  detail::operand_stop stop;  // the body's own state, stopped by the awaiting task's and by `token`
  stop.follow(outer);
  std::stop_callback<detail::request_stop_of> bridge(std::move(token), detail::request_stop_of{&stop.state});
  handle.promise().stop_ = &stop.state;
  co_return co_await task<T>{handle};
}

}  // namespace corio
