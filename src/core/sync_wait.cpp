// The pool of blocked_thread objects (include/corio/sync_wait.hpp, "Who"): one per thread that ever
// blocked in sync_wait, given back at the thread's exit and never freed, since a coroutine parked
// during a sync_wait may name its object long after (its wake-up then finds it idle, or in use by
// another thread's sync_wait, and is resumed inline or there: never through freed memory).
#include <corio/sync_wait.hpp>

#include <cstddef>
#include <mutex>
#include <vector>

namespace corio::detail {
namespace {

struct blocked_thread_pool {
  std::mutex mutex;
  std::vector<blocked_thread*> idle;  // room for every object made, so a give-back never allocates
  std::size_t made = 0;
};

// Leaked on purpose (reachable from here): threads may exit, and give theirs back, during static
// destruction.
blocked_thread_pool& pool() {
  static auto* the_pool = new blocked_thread_pool;
  return *the_pool;
}

struct this_threads_own {
  blocked_thread* thread = nullptr;
  ~this_threads_own() {
    if (thread != nullptr) {
      std::lock_guard lock(pool().mutex);
      pool().idle.push_back(thread);
    }
  }
};

thread_local this_threads_own own;

}  // namespace

blocked_thread& blocked_thread::here() {
  if (own.thread == nullptr) {
    blocked_thread_pool& shared = pool();
    std::lock_guard lock(shared.mutex);
    if (shared.idle.empty()) {
      shared.idle.reserve(shared.made + 1);  // may throw: before anything changed
      own.thread = new blocked_thread;
      ++shared.made;
    } else {
      own.thread = shared.idle.back();
      shared.idle.pop_back();
    }
  }
  return *own.thread;
}

}  // namespace corio::detail
