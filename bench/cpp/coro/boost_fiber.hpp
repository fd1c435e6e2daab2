#pragma once
// `boost-context`: stackful fibers (boost::context::fiber) on 64 KiB fixed-size stacks, resumed
// round-robin; each fiber resumes its caller back to suspend.

#include <boost/context/fiber.hpp>
#include <boost/context/fixedsize_stack.hpp>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "harness.hpp"

namespace lab {

class boost_fiber_pool {
 public:
  static constexpr std::size_t stack_bytes = 64 * 1024;

  boost_fiber_pool(std::size_t capacity, std::uint64_t switches_each, tally* counts)
      : switches_each_(switches_each), counts_(counts) {
    fibers_.reserve(capacity);
  }

  void create() {
    fibers_.emplace_back(std::allocator_arg, boost::context::fixedsize_stack(stack_bytes),
                         [switches = switches_each_, counts = counts_](boost::context::fiber&& caller) {
                           for (std::uint64_t i = 0; i < switches; ++i) {
                             ++counts->switches;
                             caller = std::move(caller).resume();
                           }
                           ++counts->finished;
                           return std::move(caller);
                         });
  }
  void launch() {}

  template <class Probe>
  void run(Probe probe) {
    for (auto& fiber : fibers_) fiber = std::move(fiber).resume();
    probe();
    for (std::uint64_t round = 0; round < switches_each_; ++round)
      for (auto& fiber : fibers_) fiber = std::move(fiber).resume();
  }

  void clear() { fibers_.clear(); }

 private:
  std::vector<boost::context::fiber> fibers_;
  std::uint64_t switches_each_;
  tally* counts_;
};

}  // namespace lab
