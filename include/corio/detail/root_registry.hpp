#pragma once
// The live roots an executor owns, so that shutting it down can find and destroy every frame.
// An intrusive doubly linked list behind a mutex: a root may finish on another thread than the one
// that adopted it (work stealing, schedule_on), so removal must be thread-safe. The lock is held only
// to link or unlink one node. Threads: every member is thread-safe.
#include <mutex>

#include <corio/detail/root.hpp>

namespace corio::detail {

class root_registry {
 public:
  void add(root_base& root) {
    std::lock_guard lock(mutex_);
    root.prev_ = nullptr;
    root.next_ = head_;
    if (head_ != nullptr) {
      head_->prev_ = &root;
    }
    head_ = &root;
  }

  void remove(root_base& root) noexcept {
    std::lock_guard lock(mutex_);
    (root.prev_ != nullptr ? root.prev_->next_ : head_) = root.next_;
    if (root.next_ != nullptr) {
      root.next_->prev_ = root.prev_;
    }
  }

  /// Calls `visit(root)` for every live root, under the lock (visit must not add or remove roots).
  template <class Visit>
  void for_each(Visit visit) {
    std::lock_guard lock(mutex_);
    for (root_base* root = head_; root != nullptr; root = root->next_) {
      visit(*root);
    }
  }

  /// Destroys every root still registered. Only when no thread can run or finish them any more.
  void destroy_all() noexcept {
    for (;;) {
      root_base* root;
      {
        std::lock_guard lock(mutex_);
        root = head_;
        if (root == nullptr) {
          return;
        }
        head_ = root->next_;
        if (head_ != nullptr) {
          head_->prev_ = nullptr;
        }
      }
      root->destroy_frame();
    }
  }

 private:
  std::mutex mutex_;
  root_base* head_ = nullptr;
};

}  // namespace corio::detail
