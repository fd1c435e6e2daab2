#pragma once
// Tells the CPU this thread is spinning (x86 PAUSE, ARM YIELD): a spin then wastes less power and
// leaves more of the core to a sibling hyper-thread; and the library's one way to wait for another
// thread's few instructions (back_off_while). Private to the library's sources.
#include <thread>

namespace corio::detail {

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

/// Waits while `busy()`: what it waits for (a critical section, a waker's schedule call, a callback
/// on another thread) is normally a few instructions long, so it spins briefly; after that the other
/// thread was probably preempted, and it yields so that thread can run (this matters on 2 cores).
template <class Busy>
void back_off_while(Busy busy) noexcept {
  for (int spins = 0; busy(); ++spins) {
    if (spins < 64) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
}

}  // namespace corio::detail
