#pragma once
// Tells the CPU this thread is spinning (x86 PAUSE, ARM YIELD): a spin then wastes less power and
// leaves more of the core to a sibling hyper-thread. Private to the library's sources.

namespace corio::detail {

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace corio::detail
