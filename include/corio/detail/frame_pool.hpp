#pragma once
// Per-thread size-class pool for coroutine frames.
//
// Purpose: creating and destroying tasks in steady state must not call malloc. Every promise type
// routes its operator new/delete here.
//
// Invariants:
//  - A block of size class c is always 16-byte aligned and at least class_bytes(c) long. Classes are
//    16 bytes apart, so a frame wastes at most 15 bytes (64-byte classes wasted ~25% on spawned tasks).
//  - Each thread owns its free lists; a block freed on thread B joins B's lists even if A allocated it
//    (frames migrate with work stealing). A list holds at most two batches of 64 blocks; past that, a
//    batch moves to a shared depot (one mutex per size class, one lock per batch), where a thread with
//    an empty list takes one before it calls malloc. So frames allocated on a spawner and freed on a
//    worker flow back instead of piling up on one side. The depot holds at most 256 MiB in all
//    and returns nothing to the system before exit (an allocator's cache, like tcmalloc's).
//  - Frames larger than max_pooled_bytes go straight to ::operator new/delete.
//  - After a thread's pool is torn down (thread exit), frees on that thread go to ::operator delete.
//  - With the environment variable CORIO_FRAME_POOL=off (read once, at the first frame), every frame
//    goes to ::operator new/delete: for ASan or valgrind users, whose tools cannot see a pooled
//    frame's use after free.
// Threads: the lists are thread-local (no atomics); only the depot is shared, behind its mutexes.
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace corio::detail {

inline constexpr std::size_t frame_granule = 16;
inline constexpr std::size_t max_pooled_bytes = 2048;

/// Counters of the calling thread's pool, for tests and diagnostics.
struct frame_pool_stats {
  std::uint64_t pooled_allocations = 0;  ///< served from a free list
  std::uint64_t fresh_allocations = 0;   ///< had to call ::operator new
};

/// Whether a T can live in a coroutine frame, which gets the default new alignment and no more (a
/// task's or generator's value type is checked against it at compile time).
template <class T>
constexpr bool fits_frame_alignment() {
  if constexpr (std::is_void_v<T> || std::is_reference_v<T>) {
    return true;
  } else {
    return alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__;
  }
}

void* allocate_frame(std::size_t bytes);
void deallocate_frame(void* frame, std::size_t bytes) noexcept;
frame_pool_stats current_frame_pool_stats() noexcept;
/// False when CORIO_FRAME_POOL=off (or 0) switched pooling off for this process.
bool frame_pool_enabled() noexcept;

/// Mixin giving a promise type pooled frame allocation.
struct pooled_frame {
  static void* operator new(std::size_t bytes) { return allocate_frame(bytes); }
  static void operator delete(void* frame, std::size_t bytes) noexcept { deallocate_frame(frame, bytes); }
};

}  // namespace corio::detail
