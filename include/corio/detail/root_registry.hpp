#pragma once
// The live roots an executor owns, so that shutting it down can find and destroy every frame.
// An intrusive doubly linked list behind a mutex: a root may finish on another thread than the one
// that adopted it (work stealing, schedule_on), so removal must be thread-safe. The lock is held only
// to link or unlink one node.
//
// Closing: close() and try_add() take the same lock, so a spawn racing a shutdown either registered
// before the close (and the shutdown's later steps cancel and destroy it) or is refused (and the
// spawner destroys the frame itself). Nothing can slip in between "stop accepting" and "cancel all"
// (tokio's owned-task list closes the same way).
// Threads: every member is thread-safe.
#include <algorithm>
#include <mutex>
#include <span>
#include <vector>

#include <corio/detail/executor.hpp>
#include <corio/detail/root.hpp>

namespace corio::detail {

class root_registry {
 public:
  /// Registers `root`; false (and nothing changes) once the registry is closed.
  [[nodiscard]] bool try_add(root_base& root) {
    std::lock_guard lock(mutex_);
    if (closed_) {
      return false;
    }
    link(root);
    return true;
  }

  /// Registers `root` even if closed: for a root that moves back to an executor it never left for
  /// good (a schedule_on that was refused), whose shutdown has not yet destroyed frames.
  void add(root_base& root) {
    std::lock_guard lock(mutex_);
    link(root);
  }

  void remove(root_base& root) noexcept {
    std::lock_guard lock(mutex_);
    (root.prev_ != nullptr ? root.prev_->next_ : head_) = root.next_;
    if (root.next_ != nullptr) {
      root.next_->prev_ = root.prev_;
    }
  }

  /// Whether no root is registered: every task this registry held has finished (or moved away).
  bool empty() {
    std::lock_guard lock(mutex_);
    return head_ == nullptr;
  }

  /// From now on try_add() refuses.
  void close() {
    std::lock_guard lock(mutex_);
    closed_ = true;
  }

  /// Calls `visit(root)` for every live root, under the lock (visit must not add or remove roots).
  template <class Visit>
  void for_each(Visit visit) {
    std::lock_guard lock(mutex_);
    for (root_base* root = head_; root != nullptr; root = root->next_) {
      visit(*root);
    }
  }

  /// Closes the registry and moves every root still registered into `out`, unlinked.
  void take_all(std::vector<root_base*>& out) {
    std::lock_guard lock(mutex_);
    closed_ = true;
    for (root_base* root = head_; root != nullptr; root = root->next_) {
      out.push_back(root);
    }
    head_ = nullptr;
  }

  /// Closes the registry and destroys every root still registered, newest first. Only when no thread
  /// can run or finish them any more.
  void destroy_all() {
    std::vector<root_base*> roots;
    take_all(roots);
    destroy_newest_first(roots);
  }

  /// Destroys `roots` in reverse spawn order: a child (spawned later) goes before its parent, so it
  /// never unregisters from a primitive in a parent frame that is already gone.
  static void destroy_newest_first(std::span<root_base*> roots) noexcept {
    struct teardown_mark {
      teardown_mark() noexcept { ++frames_in_teardown; }
      ~teardown_mark() { --frames_in_teardown; }
    } mark;
    std::sort(roots.begin(), roots.end(), [](const root_base* a, const root_base* b) { return a->seq_ > b->seq_; });
    for (root_base* root : roots) {
      root->destroy_frame();
    }
  }

 private:
  void link(root_base& root) noexcept {
    root.prev_ = nullptr;
    root.next_ = head_;
    if (head_ != nullptr) {
      head_->prev_ = &root;
    }
    head_ = &root;
  }

  std::mutex mutex_;
  root_base* head_ = nullptr;
  bool closed_ = false;
};

}  // namespace corio::detail
