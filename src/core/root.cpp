// Finishing and destroying spawned tasks; the protocol is described in include/corio/detail/root.hpp.
#include <corio/detail/root.hpp>

#include <cstdio>

namespace corio::detail {

void print_unhandled_exception(std::exception_ptr failure) noexcept {
  try {
    std::rethrow_exception(failure);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "corio: unhandled exception in a detached task: %s\n", error.what());
  } catch (...) {
    std::fprintf(stderr, "corio: unhandled non-standard exception in a detached task\n");
  }
}

void report_unjoined_failure(root_base& root, std::exception_ptr failure, executor* owner) noexcept {
  if (!failure || root.failure_reported.exchange(true, std::memory_order_acq_rel)) {
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
  } else {
    print_unhandled_exception(failure);
  }
}

void finish_spawned(root_base& root, promise_base& promise, std::coroutine_handle<> frame) noexcept {
  root.complete_(root, &promise);
  root.self_ = {};
  frame.destroy();
  executor* owner = root.owner_;
  owner->forget(root);
  join_phase before = root.phase.exchange(join_phase::finished, std::memory_order_acq_rel);
  if (before == join_phase::joiner_waiting) {
    resume_through(root.joiner_owner, root.joiner);
  } else if (root.detached.load(std::memory_order_acquire)) {
    report_unjoined_failure(root, root.failure_, owner);
  }
  root.release();
}

void root_base::destroy_frame() noexcept {
  std::coroutine_handle<> frame = std::exchange(self_, {});
  frame.destroy();
  complete_(*this, nullptr);
  phase.store(join_phase::finished, std::memory_order_release);
  release();
}

}  // namespace corio::detail
