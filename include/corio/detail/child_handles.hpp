#pragma once
// The join handles a container keeps of the tasks it spawned (task_scope, join_set), so it can cancel
// them. Guarded by the container's mutex.
// Finished children are pruned whenever the list has doubled since its last pruning: memory follows
// the children still running (at most about twice them, and at least `min_prune`), and adding one
// stays amortised O(1) however many run at once. A scope that lives as long as a server, spawning a
// handler per connection, keeps only the handlers of open connections.
#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

#include <corio/join_handle.hpp>

namespace corio::detail {

class child_handles {
 public:
  void add(join_handle<void> child) {
    if (handles_.size() >= prune_at_) {
      std::erase_if(handles_, [](const join_handle<void>& each) { return each.is_finished(); });
      if (handles_.capacity() > 4 * std::max(handles_.size(), min_prune)) {
        handles_.shrink_to_fit();  // a burst of children is over: give its memory back
      }
      prune_at_ = std::max(min_prune, 2 * handles_.size());
    }
    handles_.push_back(std::move(child));
  }

  void cancel_all() {
    for (join_handle<void>& each : handles_) {
      if (each.valid()) {
        each.cancel();
      }
    }
  }

  /// Whether one of the handles is that of the task whose record is `root`.
  bool contains(const root_base* root) const noexcept {
    return std::any_of(handles_.begin(), handles_.end(),
                       [root](const join_handle<void>& each) { return each.refers_to(root); });
  }

  std::size_t size() const noexcept { return handles_.size(); }

 private:
  static constexpr std::size_t min_prune = 64;
  std::vector<join_handle<void>> handles_;
  std::size_t prune_at_ = min_prune;
};

}  // namespace corio::detail
