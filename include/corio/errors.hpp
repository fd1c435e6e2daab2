#pragma once
// The exception types corio throws for misuse and cancellation.
#include <stdexcept>

namespace corio {

/// Thrown when a task (or join handle) that holds no coroutine is awaited: it was moved from,
/// default-constructed, or already awaited. A programmer error reported as an exception, never UB.
class invalid_task : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

/// Thrown at a suspension point of a task whose cancellation was requested (for example the losers
/// of `when_any`, a join_handle::cancel, a runtime's shutdown).
///
/// Deliberately *not* a std::exception (like glibc's abi::__forced_unwind, or Python's CancelledError
/// since 3.8): the everyday `catch (const std::exception&)` must not swallow a cancellation, or a task
/// that retries in a loop could never be stopped. Catch it by name where a task must react to it, and
/// let a `catch (...)` that does cleanup rethrow it (`throw;`). A task that swallows it anyway still
/// cannot hold a runtime's shutdown past its grace period (see runtime.hpp).
class cancelled {
 public:
  /// A fixed description, for logs.
  const char* what() const noexcept { return "corio: operation cancelled"; }
};

/// Thrown by with_timeout when the deadline passes before the operation completes.
class timed_out : public std::runtime_error {
 public:
  timed_out() : std::runtime_error("corio: operation timed out") {}
};

/// Thrown by event_loop operations that require a loop which is still accepting work.
class loop_stopped : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

/// Thrown when work is handed to a runtime that is shutting down or has shut down.
class runtime_stopped : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

}  // namespace corio
