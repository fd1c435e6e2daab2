// Finishing and destroying spawned tasks; the protocol is described in include/corio/detail/root.hpp.
#include <corio/detail/root.hpp>

#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <typeinfo>

namespace corio::detail {

namespace {
std::atomic<std::uint64_t> root_sequence{0};

/// The dynamic type of the exception being handled, demangled where the ABI can ("int", "my_error"),
/// else as the ABI names it; "unknown type" (short enough to need no allocation) if the ABI cannot
/// say or memory ran out.
std::string current_exception_type() noexcept {
  static constexpr const char* unknown = "unknown type";
  try {
    const std::type_info* type = abi::__cxa_current_exception_type();
    if (type == nullptr) {
      return unknown;
    }
    int status = 0;
    std::unique_ptr<char, void (*)(void*)> readable(abi::__cxa_demangle(type->name(), nullptr, nullptr, &status),
                                                   std::free);
    return status == 0 && readable ? std::string(readable.get()) : std::string(type->name());
  } catch (...) {
    return unknown;
  }
}
}  // namespace

std::uint64_t next_root_sequence() noexcept { return root_sequence.fetch_add(1, std::memory_order_relaxed); }

void print_unhandled_exception(std::exception_ptr failure) noexcept {
  try {
    std::rethrow_exception(failure);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "corio: unhandled exception in a detached task: %s: %s\n", current_exception_type().c_str(),
                 error.what());
  } catch (...) {
    std::fprintf(stderr, "corio: unhandled exception in a detached task: %s (not derived from std::exception)\n",
                 current_exception_type().c_str());
  }
}

void report_unjoined_failure(root_base& root, executor* owner) noexcept {
  std::exception_ptr failure = root.failure_;
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
  } else if (root.sink_ != nullptr) {
    try {
      (*root.sink_)(failure);
    } catch (...) {
      print_unhandled_exception(failure);
    }
  } else {
    print_unhandled_exception(failure);
  }
}

void root_base::end_join(executor* owner) noexcept {
  if (failure_ && owner != nullptr) {
    sink_ = owner->unhandled_sink();  // before the phase CAS publishes it to a late detach()
  }
  join_phase before = phase.load(std::memory_order_seq_cst);
  for (;;) {
    if (before == join_phase::joiner_waiting) {
      if (phase.compare_exchange_weak(before, join_phase::waking, std::memory_order_acq_rel)) {
        resume_through(joiner_owner, joiner);
        phase.store(join_phase::finished, std::memory_order_release);  // the joiner's destructor may go
        return;
      }
    } else if (phase.compare_exchange_weak(before, join_phase::finished, std::memory_order_seq_cst)) {
      if (detached.load(std::memory_order_seq_cst)) {  // pairs with detach(): store, then load phase
        report_unjoined_failure(*this, owner);
      }
      return;
    }
  }
}

void finish_spawned(root_base& root, promise_base& promise, std::coroutine_handle<> frame) noexcept {
  root.complete_(root, &promise);
  root.self_ = {};
  frame.destroy();
  executor* owner = root.owner_;
  owner->forget(root);
  root.end_join(owner);
  root.release();
}

void root_base::destroy_frame() noexcept {
  std::coroutine_handle<> frame = std::exchange(self_, {});
  frame.destroy();
  complete_(*this, nullptr);
  end_join(nullptr);
  release();
}

}  // namespace corio::detail
