// Per-thread size-class pool for coroutine frames; see include/corio/detail/frame_pool.hpp.
#include <corio/detail/frame_pool.hpp>

#include <array>
#include <atomic>
#include <mutex>
#include <new>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define CORIO_FRAME_POOL_POISONS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CORIO_FRAME_POOL_POISONS 1
#endif
#endif
#if defined(CORIO_FRAME_POOL_POISONS)
#include <sanitizer/asan_interface.h>
#endif

#include "core/env_setting.hpp"

namespace corio::detail {
namespace {

constexpr std::size_t class_count = max_pooled_bytes / frame_granule;
// A thread keeps up to two batches per class; beyond that it hands a batch to the depot.
constexpr std::size_t batch_blocks = 64;
// The depot keeps at most this many bytes in all (a burst of a million spawned tasks fits, so their
// frames are reused instead of being coalesced back into malloc's bins); beyond that, batches go back
// to the allocator. Memory parked here is not returned to the system before the process exits.
constexpr std::size_t depot_capacity_bytes = std::size_t{256} << 20;

struct free_block {
  free_block* next;
};

// Under AddressSanitizer a pooled block is poisoned while it sits in a free list, so a coroutine that
// touches a frame after it was destroyed is reported even though the memory was never freed.
void poison(void* block, std::size_t bytes) noexcept {
#if defined(CORIO_FRAME_POOL_POISONS)
  ASAN_POISON_MEMORY_REGION(block, bytes);
#else
  (void)block;
  (void)bytes;
#endif
}

void unpoison(void* block, std::size_t bytes) noexcept {
#if defined(CORIO_FRAME_POOL_POISONS)
  ASAN_UNPOISON_MEMORY_REGION(block, bytes);
#else
  (void)block;
  (void)bytes;
#endif
}

std::size_t class_bytes(std::size_t index) { return (index + 1) * frame_granule; }

free_block* next_of(free_block* block) noexcept {
  unpoison(block, sizeof(free_block));
  free_block* next = block->next;
  poison(block, sizeof(free_block));
  return next;
}

void delete_chain(free_block* chain, std::size_t bytes) noexcept {
  while (chain != nullptr) {
    unpoison(chain, bytes);
    free_block* next = chain->next;
    ::operator delete(chain);
    chain = next;
  }
}

// Where threads trade whole batches of free blocks, one lock per batch, so that frames allocated on
// one thread and freed on another (a spawner and a worker) flow back instead of piling up on one side
// while the other calls malloc (tcmalloc's transfer cache, in small).
class depot {
 public:
  depot() = default;
  depot(const depot&) = delete;
  depot& operator=(const depot&) = delete;
  ~depot() {
    for (std::size_t index = 0; index < class_count; ++index) {
      for (free_block* chain : shelves_[index].batches) {
        delete_chain(chain, class_bytes(index));
      }
    }
  }

  /// Takes a chain of batch_blocks blocks; returns false (keeping nothing) if the shelf is full.
  bool put(std::size_t index, free_block* chain) {
    std::size_t bytes = batch_blocks * class_bytes(index);
    if (held_bytes_.fetch_add(bytes, std::memory_order_relaxed) + bytes > depot_capacity_bytes) {
      held_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
      return false;
    }
    shelf& s = shelves_[index];
    std::lock_guard lock(s.mutex);
    s.batches.push_back(chain);
    s.count.store(s.batches.size(), std::memory_order_relaxed);
    return true;
  }

  /// A chain of batch_blocks blocks, or null.
  free_block* take(std::size_t index) {
    shelf& s = shelves_[index];
    // A hint, read without the lock: while a thread's live set grows, its list is empty at every
    // allocation, and it must not take a lock each time just to find the shelf empty too.
    if (s.count.load(std::memory_order_relaxed) == 0) {
      return nullptr;
    }
    std::lock_guard lock(s.mutex);
    if (s.batches.empty()) {
      return nullptr;
    }
    free_block* chain = s.batches.back();
    s.batches.pop_back();
    s.count.store(s.batches.size(), std::memory_order_relaxed);
    held_bytes_.fetch_sub(batch_blocks * class_bytes(index), std::memory_order_relaxed);
    return chain;
  }

 private:
  struct shelf {
    std::mutex mutex;
    std::vector<free_block*> batches;
    std::atomic<std::size_t> count{0};  // batches.size(), for the lock-free emptiness check
  };
  std::array<shelf, class_count> shelves_;
  std::atomic<std::size_t> held_bytes_{0};  // across all shelves; bounded by depot_capacity_bytes
};

depot& shared_depot() {
  static depot instance;  // constructed before, and so destroyed after, any thread pool that uses it
  return instance;
}

struct size_class_list {
  free_block* head = nullptr;
  std::size_t length = 0;
};

struct thread_pool {
  std::array<size_class_list, class_count> lists{};
  frame_pool_stats stats{};

  ~thread_pool() {
    for (std::size_t index = 0; index < lists.size(); ++index) {
      delete_chain(lists[index].head, class_bytes(index));
    }
  }
};

// The pool is reached through a trivially destructible pointer so that frames freed during
// thread-local or static destruction, after the pool itself is gone, can still be released safely.
thread_local constinit thread_pool* current_pool = nullptr;
thread_local constinit bool pool_torn_down = false;

struct pool_owner {
  thread_pool pool;
  pool_owner() {
    shared_depot();  // make sure the depot outlives this pool
    current_pool = &pool;
  }
  ~pool_owner() {
    current_pool = nullptr;
    pool_torn_down = true;
  }
};

// CORIO_FRAME_POOL=off (or 0; on or 1 is the default; read once, at the first frame) hands every frame
// to ::operator new/delete, so a user's AddressSanitizer or valgrind sees each frame's lifetime even
// against a release build.
bool pool_switched_off() noexcept {
  static const bool off = [] {
    env_knob knob{"CORIO_FRAME_POOL"};  // read once: its report can only come once
    return env_choice(knob, {{"on", 0}, {"1", 0}, {"off", 1}, {"0", 1}}, 0, "on") == 1;
  }();
  return off;
}

// The first frame of a thread makes its pool. A switched-off pool is never made, so a set
// current_pool means it is on.
thread_pool* pool_for_this_thread() {
  if (current_pool == nullptr && !pool_torn_down && !pool_switched_off()) {
    thread_local pool_owner owner;
  }
  return current_pool;
}

std::size_t class_index(std::size_t bytes) { return (bytes + frame_granule - 1) / frame_granule - 1; }

// Moves the newest batch_blocks blocks of a full thread list to the depot (or back to the allocator).
void hand_over_batch(size_class_list& list, std::size_t index) noexcept {
  free_block* chain = list.head;
  free_block* last = chain;
  for (std::size_t i = 1; i < batch_blocks; ++i) {
    last = next_of(last);
  }
  unpoison(last, sizeof(free_block));
  list.head = last->next;
  last->next = nullptr;
  poison(last, sizeof(free_block));
  list.length -= batch_blocks;
  bool kept = false;
  try {
    kept = shared_depot().put(index, chain);
  } catch (...) {  // the depot's vector could not grow: give the memory back instead
  }
  if (!kept) {
    delete_chain(chain, class_bytes(index));
  }
}

// Takes the first block of `list`, which has one.
free_block* pop_block(thread_pool& pool, size_class_list& list, std::size_t index) noexcept {
  free_block* block = list.head;
  unpoison(block, class_bytes(index));
  list.head = block->next;
  --list.length;
  ++pool.stats.pooled_allocations;
  return block;
}

void push_block(size_class_list& list, void* frame, std::size_t index) noexcept {
  auto* block = static_cast<free_block*>(frame);
  block->next = list.head;
  list.head = block;
  ++list.length;
  poison(block, class_bytes(index));
}

// What allocate_frame's and deallocate_frame's common paths (this thread's pool is made and has a
// block of the class, or room for one) leave to these: the first frame of a thread, a list to refill
// from the depot or to hand a batch to, frames too large to pool, a switched-off pool. Out of line,
// so that the common paths save no registers: a frame's allocation is part of every task's creation,
// the cost the lab's `coro` experiment compares with a bare C++20 coroutine's.
[[gnu::noinline]] void* allocate_frame_slowly(std::size_t bytes) {
  if (bytes > max_pooled_bytes) {
    return ::operator new(bytes);
  }
  // Always round up to the class size: the block may later be freed into some thread's list.
  std::size_t index = class_index(bytes);
  thread_pool* pool = pool_for_this_thread();
  if (pool == nullptr) {
    return ::operator new(class_bytes(index));
  }
  size_class_list& list = pool->lists[index];
  if (list.head == nullptr) {
    list.head = shared_depot().take(index);
    list.length = list.head != nullptr ? batch_blocks : 0;
  }
  if (list.head != nullptr) {
    return pop_block(*pool, list, index);
  }
  ++pool->stats.fresh_allocations;
  return ::operator new(class_bytes(index));
}

[[gnu::noinline]] void deallocate_frame_slowly(void* frame, std::size_t bytes) noexcept {
  thread_pool* pool = bytes <= max_pooled_bytes ? pool_for_this_thread() : nullptr;
  if (pool == nullptr) {
    ::operator delete(frame);
    return;
  }
  std::size_t index = class_index(bytes);
  size_class_list& list = pool->lists[index];
  push_block(list, frame, index);
  if (list.length == 2 * batch_blocks) {
    hand_over_batch(list, index);
  }
}

}  // namespace

void* allocate_frame(std::size_t bytes) {
  thread_pool* pool = current_pool;
  if (bytes <= max_pooled_bytes && pool != nullptr) [[likely]] {
    std::size_t index = class_index(bytes);
    if (size_class_list& list = pool->lists[index]; list.head != nullptr) [[likely]] {
      return pop_block(*pool, list, index);
    }
  }
  return allocate_frame_slowly(bytes);
}

void deallocate_frame(void* frame, std::size_t bytes) noexcept {
  thread_pool* pool = current_pool;
  if (bytes <= max_pooled_bytes && pool != nullptr) [[likely]] {
    std::size_t index = class_index(bytes);
    if (size_class_list& list = pool->lists[index]; list.length + 1 < 2 * batch_blocks) [[likely]] {
      push_block(list, frame, index);
      return;
    }
  }
  deallocate_frame_slowly(frame, bytes);
}

bool frame_pool_enabled() noexcept { return !pool_switched_off(); }

frame_pool_stats current_frame_pool_stats() noexcept {
  thread_pool* pool = pool_for_this_thread();
  return pool != nullptr ? pool->stats : frame_pool_stats{};
}

}  // namespace corio::detail
