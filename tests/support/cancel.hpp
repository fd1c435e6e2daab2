#pragma once
// Test helper: give a task a cancellation token of the test's own, so that a plain thread (or another
// task) can cancel it mid-wait without a join_handle.
#include <corio/cancellation.hpp>
#include <corio/task.hpp>

#include <stop_token>
#include <utility>

namespace corio::test {

inline corio::task<void> cancellable_by(const std::stop_token& token, corio::task<void> body) {
  return corio::with_stop_token(token, std::move(body));
}

}  // namespace corio::test
