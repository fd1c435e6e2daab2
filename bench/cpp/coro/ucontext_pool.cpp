#include "ucontext_pool.hpp"

#include <cstdlib>

#include "../common/check.hpp"

namespace lab {

namespace {

// makecontext passes only ints, so the coroutine's address travels as two 32-bit halves.
void body(unsigned int low, unsigned int high) {
  auto address = (static_cast<std::uintptr_t>(high) << 32) | static_cast<std::uintptr_t>(low);
  auto* self = reinterpret_cast<ucontext_coroutine*>(address);
  for (std::uint64_t i = 0; i < self->switches; ++i) {
    ++self->counts->switches;
    swapcontext(&self->context, self->scheduler);
  }
  ++self->counts->finished;
}  // returning follows uc_link back to the scheduler

}  // namespace

ucontext_pool::ucontext_pool(std::size_t capacity, std::uint64_t switches_each, tally* counts)
    : switches_each_(switches_each), counts_(counts) {
  coroutines_.reserve(capacity);
}

void ucontext_pool::create() {
  expect(coroutines_.size() < coroutines_.capacity(), "ucontext pool over capacity (contexts must not move)");
  void* stack = std::malloc(stack_bytes);
  expect(stack != nullptr, "out of memory for a ucontext stack");
  auto& self = coroutines_.emplace_back();
  self.scheduler = &scheduler_;
  self.stack = stack;
  self.switches = switches_each_;
  self.counts = counts_;
  expect(getcontext(&self.context) == 0, "getcontext failed");
  self.context.uc_stack.ss_sp = stack;
  self.context.uc_stack.ss_size = stack_bytes;
  self.context.uc_link = &scheduler_;
  auto address = reinterpret_cast<std::uintptr_t>(&self);
  makecontext(&self.context, reinterpret_cast<void (*)()>(&body), 2, static_cast<unsigned int>(address),
              static_cast<unsigned int>(address >> 32));
}

void ucontext_pool::resume(ucontext_coroutine& coroutine) { swapcontext(&scheduler_, &coroutine.context); }

void ucontext_pool::clear() {
  for (auto& coroutine : coroutines_) std::free(coroutine.stack);
  coroutines_.clear();
}

}  // namespace lab
