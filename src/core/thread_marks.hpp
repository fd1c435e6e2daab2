#pragma once
// A thread's record of the work it is in the middle of, for code that runs inside that work.
//
// Design note.
// Purpose: some work runs arbitrary user code part-way through (a stop request runs callbacks; a
//   shutdown destroys frames), and that code may reach the same object again on the same thread: it
//   may destroy the object the work is running on, or start the same work on it again. Such work puts
//   a mark naming its object on its thread's list for its duration (a scoped object, innermost first),
//   so that the nested call can find it and act on it: flag it, or return at once.
// Threads: a list belongs to its thread alone (thread-local), so nothing is atomic and no lock is
//   taken; a mark lives on the stack of the thread whose list holds it. Each pair of template
//   arguments has its own list.
// Cost: a mark is two pointer stores in and one out; a look-up walks the marks of this thread only,
//   which are as many as the work nests (one, almost always).
#include <utility>

namespace corio::detail {

/// Nothing shared beyond the mark itself.
struct no_extra {};

/// One mark on this thread's list, naming `object` while it lives. `Extra` is what the work and the
/// code nested in it share about the mark (the nested code writes it through find()).
template <class Object, class Extra = no_extra>
class thread_mark {
 public:
  explicit thread_mark(const Object* object) noexcept : object_(object), outer_(std::exchange(top(), this)) {}
  thread_mark(const thread_mark&) = delete;
  thread_mark& operator=(const thread_mark&) = delete;
  ~thread_mark() { top() = outer_; }

  /// The innermost mark of this thread naming `object`, or null.
  static thread_mark* find(const Object* object) noexcept {
    for (thread_mark* mark = top(); mark != nullptr; mark = mark->outer_) {
      if (mark->object_ == object) {
        return mark;
      }
    }
    return nullptr;
  }

  Extra extra{};

 private:
  static thread_mark*& top() noexcept {
    thread_local constinit thread_mark* innermost = nullptr;
    return innermost;
  }

  const Object* object_;
  thread_mark* outer_;
};

}  // namespace corio::detail
