#pragma once
// The cooperative budget: how many operations a task may complete without suspending before corio
// makes it yield, so that one task looping on always-ready operations cannot starve the others on its
// thread (tokio's policy, with the same number). Executors refill it before each resume from their run
// queue; operations that would complete without suspending spend one unit, and once it is spent they
// suspend the task to the back of the run queue instead. A loop with no co_await at all cannot be
// preempted; such work belongs in spawn_blocking. Per thread; no synchronisation.
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

}  // namespace corio::detail
