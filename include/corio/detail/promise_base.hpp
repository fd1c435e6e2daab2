#pragma once
// What every corio task promise shares: pooled frames, the continuation handshake, and the
// cancellation token inherited from the awaiter.
//
// The handshake (why await_suspend returns bool rather than the child's handle):
//   g++ 12 does not compile symmetric transfer into a tail call at -O0 or under the sanitizers, so a
//   loop that awaits millions of synchronously completing tasks would grow the stack by two frames
//   per iteration. Instead the awaiter starts the child with an ordinary resume(), which returns when
//   the child first suspends or finishes, and the two sides agree through one atomic byte:
//     awaiter (after child.resume()): state.exchange(awaiter_suspended)
//       - saw `done`    -> the child finished inline: return false, the awaiter continues on this stack.
//       - saw `running` -> the child is suspended elsewhere: return true; the child resumes us later.
//     child (final_suspend):          state.exchange(done)
//       - saw `awaiter_suspended` -> hand control to the continuation (symmetric transfer).
//       - saw `running`           -> the awaiter is still inside await_suspend; it will see `done`.
//   Both exchanges are acq_rel: the winner of the race reads what the loser wrote (the continuation,
//   the result) because the loser's exchange released it. The stack grows only along the chain of
//   asynchronous completions, which is bounded by the nesting depth of co_await, never by a loop count.
//
// Rejected: a thread-local trampoline (needs every completion to know its loop; sync_wait on a plain
// thread has none), and relying on the tail call (breaks in the Debug and sanitizer presets).
#include <atomic>
#include <coroutine>
#include <cstdint>
#include <type_traits>

#include <corio/detail/frame_pool.hpp>
#include <corio/detail/stop_state.hpp>

namespace corio::detail {

enum class await_state : std::uint8_t { running, awaiter_suspended, done };

struct promise_base;
struct root_base;

/// Called by a spawned task's final suspension: moves its outcome into its root record, destroys the
/// frame, leaves the registry and wakes the joiner. Defined in src/core/root.cpp.
void finish_spawned(root_base& root, promise_base& promise, std::coroutine_handle<> frame) noexcept;

struct promise_base : pooled_frame {
  std::coroutine_handle<> continuation_;
  std::atomic<await_state> state_{await_state::running};
  /// This frame is a spawned task's own frame: it has no awaiter, its record takes the outcome.
  bool spawned_ = false;
  /// This frame runs as (or under) one operand of when_all/when_any, whose siblings run on the same
  /// executor, or under with_timeout, whose timer lives there: it cannot move to another one alone
  /// (schedule_on refuses).
  bool shares_executor_ = false;
  /// The stop token of the root that started this chain of tasks (spawn, when_any, sync_wait), or
  /// null when nobody can cancel it. Borrowed: the root outlives every task it awaits.
  stop_state* stop_ = nullptr;
  /// The spawned task this frame belongs to (its own record if spawned_, else inherited from the
  /// awaiter), or null for a chain nobody spawned (sync_wait). Borrowed, like stop_. Ownership of the
  /// whole chain moves with it when a frame hops executors (schedule_on).
  root_base* root_ = nullptr;

  struct final_awaiter {
    bool await_ready() const noexcept { return false; }
    template <class Promise>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<Promise> self) const noexcept {
      promise_base& promise = self.promise();
      if (promise.spawned_) {
        finish_spawned(*promise.root_, promise, self);
        return std::noop_coroutine();
      }
      if (promise.state_.exchange(await_state::done, std::memory_order_acq_rel) ==
          await_state::awaiter_suspended) {
        return promise.continuation_;
      }
      return std::noop_coroutine();
    }
    void await_resume() const noexcept {}
  };

  std::suspend_always initial_suspend() const noexcept { return {}; }
  final_awaiter final_suspend() const noexcept { return {}; }

  bool stop_requested() const noexcept { return stop_ != nullptr && stop_->stop_requested(); }

  /// A task started as the callee of `parent` runs for the same root and is cancelled with it
  /// (a token already given to the child wins).
  void inherit_chain(const promise_base* parent) noexcept {
    if (parent == nullptr) {
      return;
    }
    if (stop_ == nullptr) {
      stop_ = parent->stop_;
    }
    root_ = parent->root_;
    shares_executor_ = parent->shares_executor_;
  }
};

/// The corio promise behind `handle`, or null for a foreign coroutine type.
template <class Promise>
promise_base* chain_of(std::coroutine_handle<Promise> handle) noexcept {
  if constexpr (std::is_base_of_v<promise_base, Promise>) {
    return &handle.promise();
  } else {
    return nullptr;
  }
}

/// The cancellation token of `promise`'s chain, or null (no promise, or nobody can cancel it).
inline stop_state* stop_of(const promise_base* promise) noexcept {
  return promise != nullptr ? promise->stop_ : nullptr;
}

/// `co_await current_root()`: the record of the spawned task the awaiting chain belongs to, or null (a
/// chain nobody spawned). Never suspends.
struct current_root_query {
  root_base* root = nullptr;
  bool await_ready() const noexcept { return false; }
  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> self) noexcept {
    promise_base* chain = chain_of(self);
    root = chain != nullptr ? chain->root_ : nullptr;
    return false;
  }
  root_base* await_resume() const noexcept { return root; }
};
inline current_root_query current_root() noexcept { return {}; }

/// The cancellation token of the coroutine behind `handle`, if its promise carries one.
template <class Promise>
stop_state* stop_token_of(std::coroutine_handle<Promise> handle) noexcept {
  return stop_of(chain_of(handle));
}

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

/// Starts `child` as the callee of `parent` and reports whether `parent` must stay suspended.
template <class ChildPromise, class ParentPromise>
bool start_child(std::coroutine_handle<ChildPromise> child, std::coroutine_handle<ParentPromise> parent) {
  promise_base& promise = child.promise();
  promise.continuation_ = parent;
  promise.inherit_chain(chain_of(parent));
  child.resume();
  return promise.state_.exchange(await_state::awaiter_suspended, std::memory_order_acq_rel) != await_state::done;
}

}  // namespace corio::detail
