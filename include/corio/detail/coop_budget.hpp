#pragma once
// The cooperative budget: how many operations a task may complete without suspending before corio
// makes it yield, so that one task looping on always-ready operations cannot starve the others on its
// thread (tokio's policy, with the same number). Executors refill it before each resume from their run
// queue; operations that would complete without suspending spend one unit, and once it is spent they
// suspend the task through its executor's yield_for_budget instead (the back of the run queue, or on
// a runtime worker right behind the task it just woke, within a bounded chain: src/sched/worker.hpp). A loop with no co_await at all cannot be
// preempted; such work belongs in spawn_blocking. Per thread; no synchronisation.
#include <coroutine>

#include <corio/detail/executor.hpp>

namespace corio::detail {

inline constexpr int coop_budget_per_turn = 128;
inline thread_local constinit int coop_budget = coop_budget_per_turn;

inline void refill_coop_budget() noexcept { coop_budget = coop_budget_per_turn; }

/// Spends one unit; true if the budget is exhausted and the caller should yield to its executor.
inline bool spend_coop_budget() noexcept {
  if (coop_budget > 0) {
    --coop_budget;
    return false;
  }
  return current_executor != nullptr;
}

/// For an awaitable whose operation completed (or was cancelled) without suspending, in its
/// await_suspend: spends one unit and, if the budget is spent, requeues `self` through
/// yield_for_budget and returns true (the caller must then suspend and touch nothing); else returns
/// false (continue at once). Every such path in corio goes through here, so a task that loops on
/// operations that never really suspend (a cancelled sleep that it catches, say) still returns to
/// its executor regularly, and a runtime's shutdown grace period bounds it. An awaiter whose
/// destructor must act if the frame is destroyed while queued passes `queued`: it is set to true
/// before the push (after it, another worker may already resume the coroutine).
inline bool yield_if_budget_spent(std::coroutine_handle<> self, bool* queued = nullptr) {
  if (!spend_coop_budget()) {
    return false;
  }
  if (queued != nullptr) {
    *queued = true;
  }
  current_executor->yield_for_budget(self);
  return true;
}

}  // namespace corio::detail
