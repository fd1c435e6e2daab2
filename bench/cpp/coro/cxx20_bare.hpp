#pragma once
// `cxx20-bare`: the report's method. A vector of wrappers around C++20 coroutines whose body is a
// co_yield loop, resumed round-robin by a plain loop. Frames come from the default operator new.

#include <coroutine>
#include <cstdint>
#include <exception>
#include <utility>
#include <vector>

#include "harness.hpp"

namespace lab {

/// Owns one coroutine frame; destroys it with the wrapper.
class yielder {
 public:
  struct promise_type {
    yielder get_return_object() { return yielder(std::coroutine_handle<promise_type>::from_promise(*this)); }
    std::suspend_always initial_suspend() noexcept { return {}; }
    std::suspend_always final_suspend() noexcept { return {}; }
    std::suspend_always yield_value(std::uint64_t) noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { std::terminate(); }
  };

  explicit yielder(std::coroutine_handle<promise_type> handle) : handle_(handle) {}
  yielder(yielder&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  yielder& operator=(yielder&&) = delete;
  ~yielder() {
    if (handle_) handle_.destroy();
  }

  void resume() { handle_.resume(); }
  bool done() const { return handle_.done(); }

 private:
  std::coroutine_handle<promise_type> handle_;
};

inline yielder yield_loop(std::uint64_t switches, tally* counts) {
  for (std::uint64_t i = 0; i < switches; ++i) {
    ++counts->switches;
    co_yield i;
  }
  ++counts->finished;
}

class cxx20_bare_pool {
 public:
  cxx20_bare_pool(std::size_t capacity, std::uint64_t switches_each, tally* counts)
      : switches_each_(switches_each), counts_(counts) {
    coroutines_.reserve(capacity);
  }

  void create() { coroutines_.emplace_back(yield_loop(switches_each_, counts_)); }
  void launch() {}

  template <class Probe>
  void run(Probe probe) {
    for (auto& coroutine : coroutines_) coroutine.resume();
    probe();
    for (std::uint64_t round = 0; round < switches_each_; ++round)
      for (auto& coroutine : coroutines_) coroutine.resume();
  }

  void clear() { coroutines_.clear(); }

 private:
  std::vector<yielder> coroutines_;
  std::uint64_t switches_each_;
  tally* counts_;
};

}  // namespace lab
