#pragma once
// `ucontext`: glibc makecontext/swapcontext on 64 KiB stacks from std::malloc (like Boost's
// fixedsize_stack), resumed round-robin. swapcontext saves the signal mask (a system call) on every
// switch: that is ucontext's cost and is kept.

#include <ucontext.h>

#include <cstdint>
#include <vector>

#include "harness.hpp"

namespace lab {

/// One coroutine: its context and stack. Never moves once made (a ucontext_t points into itself).
struct ucontext_coroutine {
  ucontext_t context;
  ucontext_t* scheduler;
  void* stack;
  std::uint64_t switches;
  tally* counts;
};

class ucontext_pool {
 public:
  static constexpr std::size_t stack_bytes = 64 * 1024;

  ucontext_pool(std::size_t capacity, std::uint64_t switches_each, tally* counts);
  ucontext_pool(const ucontext_pool&) = delete;
  ucontext_pool& operator=(const ucontext_pool&) = delete;
  ~ucontext_pool() { clear(); }

  void create();
  void launch() {}

  template <class Probe>
  void run(Probe probe) {
    for (auto& coroutine : coroutines_) resume(coroutine);
    probe();
    for (std::uint64_t round = 0; round < switches_each_; ++round)
      for (auto& coroutine : coroutines_) resume(coroutine);
  }

  void clear();

 private:
  void resume(ucontext_coroutine& coroutine);

  std::vector<ucontext_coroutine> coroutines_;
  ucontext_t scheduler_{};
  std::uint64_t switches_each_;
  tally* counts_;
};

}  // namespace lab
