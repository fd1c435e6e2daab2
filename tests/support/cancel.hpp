#pragma once
// Test helper: give a task a cancellation token of the test's own, so that a plain thread (or another
// task) can cancel it mid-wait without a join_handle.
#include <corio/task.hpp>

#include <stop_token>

namespace corio::test {

// `token` must outlive the task.
inline corio::task<void> cancellable_by(const std::stop_token& token, corio::task<void> body) {
  auto handle = body.release();
  handle.promise().stop_ = &token;
  return corio::task<void>(handle);
}

}  // namespace corio::test
