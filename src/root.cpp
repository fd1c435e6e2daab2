// Finishing a spawned root; the join protocol is described in include/corio/detail/root.hpp.
#include <corio/detail/root.hpp>

#include <cstdio>

namespace corio::detail {

void report_unjoined_failure(join_state_base& state, std::exception_ptr failure, executor* owner) noexcept {
  if (!failure || state.failure_reported.exchange(true, std::memory_order_acq_rel)) {
    return;
  }
  try {
    std::rethrow_exception(failure);
  } catch (const cancelled&) {
    return;  // a cancelled task nobody joins is not an error
  } catch (...) {
  }
  if (owner != nullptr) {
    owner->report_unhandled(failure);
    return;
  }
  try {
    std::rethrow_exception(failure);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "corio: unhandled exception in a detached task: %s\n", error.what());
  } catch (...) {
    std::fprintf(stderr, "corio: unhandled non-standard exception in a detached task\n");
  }
}

void finish_root(root_base& root) noexcept {
  root.finished_ = true;
  executor* owner = root.owner_;
  owner->forget(root);
  join_state_base& state = *root.join_;
  join_phase before = state.phase.exchange(join_phase::finished, std::memory_order_acq_rel);
  if (before == join_phase::joiner_waiting) {
    resume_through(state.joiner_owner, state.joiner);
  } else if (state.detached.load(std::memory_order_acquire)) {
    report_unjoined_failure(state, root.failure_, owner);
  }
}

}  // namespace corio::detail
