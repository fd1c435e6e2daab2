// detail::child_handles: the handles task_scope and join_set keep of their children stay proportional
// to the children still running, not to every child ever spawned.
#include <corio/detail/child_handles.hpp>
#include <corio/join_handle.hpp>
#include <corio/runtime.hpp>
#include <corio/yield.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>

namespace {

corio::task<void> quick() { co_return; }

// 10,000 children, 100 at a time, each batch finished before the next (one worker runs them in
// order behind the yield): without pruning the list would hold all 10,000.
TEST(child_handles, finished_children_are_pruned_as_the_list_grows) {
  corio::runtime rt({.workers = 1});
  std::size_t most = rt.block_on([]() -> corio::task<std::size_t> {
    corio::detail::child_handles handles;
    std::size_t most = 0;
    for (int batch = 0; batch < 100; ++batch) {
      for (int i = 0; i < 100; ++i) {
        handles.add(corio::spawn(quick()));
        most = std::max(most, handles.size());
      }
      co_await corio::yield();
    }
    co_return most;
  }());
  EXPECT_LE(most, 2 * 164u) << "finished children were kept";
}

}  // namespace
