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
/// of `when_any`). Derives from std::runtime_error so `catch (const std::exception&)` sees it.
class cancelled : public std::runtime_error {
 public:
  cancelled() : std::runtime_error("corio: operation cancelled") {}
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
