#pragma once
// An asymmetric store-load barrier: the frequent side (every post) pays only a compiler barrier, the
// rare side (a loop about to park) pays a membarrier(2) system call that forces a full memory barrier
// on every CPU running a thread of this process.
//
// Why: the parking handshake (parker.hpp) needs a store-load barrier on both sides: the producer stores
// its queue tail then loads the parker word; the loop stores the parker word then loads every tail.
// A seq_cst store costs an xchg (~20 cycles) on every post; with membarrier the loop's heavy barrier
// orders the producer's plain store before its load whenever it matters: the barrier runs on the
// producer's CPU either before its store (so its later load sees `parked`), after its load (so the
// store is visible to the loop's re-check), or in between (both).
// Fallback: where membarrier is unavailable (old kernels, seccomp profiles that block it), light()
// reports false and producers keep the seq_cst store; heavy() is then not needed.
// Threads: all functions thread-safe. Folly's asymmetricHeavyBarrier is the same idea.
#include <atomic>

namespace corio::detail {

enum class barrier_mode : int { unknown, asymmetric, symmetric };

extern std::atomic<barrier_mode> current_barrier_mode;

/// Registers with the kernel on first use; returns the mode that will be used from then on.
barrier_mode resolve_barrier_mode() noexcept;

/// True if producers may publish with a release store plus light_barrier().
inline bool asymmetric_barriers() noexcept {
  barrier_mode mode = current_barrier_mode.load(std::memory_order_relaxed);
  if (mode == barrier_mode::unknown) {
    mode = resolve_barrier_mode();
  }
  return mode == barrier_mode::asymmetric;
}

/// The light half: keeps the compiler from moving memory accesses across it.
inline void light_barrier() noexcept { std::atomic_signal_fence(std::memory_order_seq_cst); }

/// The heavy half: a full barrier on every CPU running this process. No-op in symmetric mode.
void heavy_barrier() noexcept;

}  // namespace corio::detail
