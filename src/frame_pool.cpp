// Per-thread size-class pool for coroutine frames; see include/corio/detail/frame_pool.hpp.
#include <corio/detail/frame_pool.hpp>

#include <array>
#include <new>

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

namespace corio::detail {
namespace {

constexpr std::size_t class_count = max_pooled_bytes / frame_granule;
// Each list keeps at most this many bytes, so 30k live frames of a class can be reused in full.
constexpr std::size_t bytes_kept_per_class = std::size_t{8} << 20;

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

struct size_class_list {
  free_block* head = nullptr;
  std::size_t length = 0;
};

struct thread_pool {
  std::array<size_class_list, class_count> lists{};
  frame_pool_stats stats{};

  ~thread_pool() {
    for (std::size_t index = 0; index < lists.size(); ++index) {
      size_class_list& list = lists[index];
      while (list.head != nullptr) {
        free_block* block = list.head;
        unpoison(block, class_bytes(index));
        list.head = block->next;
        ::operator delete(block);
      }
    }
  }
};

// The pool is reached through a trivially destructible pointer so that frames freed during
// thread-local or static destruction, after the pool itself is gone, can still be released safely.
thread_local thread_pool* current_pool = nullptr;
thread_local bool pool_torn_down = false;

struct pool_owner {
  thread_pool pool;
  pool_owner() { current_pool = &pool; }
  ~pool_owner() {
    current_pool = nullptr;
    pool_torn_down = true;
  }
};

thread_pool* pool_for_this_thread() {
  if (current_pool == nullptr && !pool_torn_down) {
    thread_local pool_owner owner;
  }
  return current_pool;
}

std::size_t class_index(std::size_t bytes) { return (bytes + frame_granule - 1) / frame_granule - 1; }

}  // namespace

void* allocate_frame(std::size_t bytes) {
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
  if (list.head != nullptr) {
    free_block* block = list.head;
    unpoison(block, class_bytes(index));
    list.head = block->next;
    --list.length;
    ++pool->stats.pooled_allocations;
    return block;
  }
  ++pool->stats.fresh_allocations;
  return ::operator new(class_bytes(index));
}

void deallocate_frame(void* frame, std::size_t bytes) noexcept {
  thread_pool* pool = bytes <= max_pooled_bytes ? pool_for_this_thread() : nullptr;
  if (pool == nullptr) {
    ::operator delete(frame);
    return;
  }
  std::size_t index = class_index(bytes);
  size_class_list& list = pool->lists[index];
  if (list.length * class_bytes(index) >= bytes_kept_per_class) {
    ::operator delete(frame);
    return;
  }
  auto* block = static_cast<free_block*>(frame);
  block->next = list.head;
  list.head = block;
  ++list.length;
  poison(block, class_bytes(index));
}

frame_pool_stats current_frame_pool_stats() noexcept {
  thread_pool* pool = pool_for_this_thread();
  return pool != nullptr ? pool->stats : frame_pool_stats{};
}

}  // namespace corio::detail
