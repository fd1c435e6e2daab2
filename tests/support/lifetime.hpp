#pragma once
// Test helper: a value that counts how many of its kind are alive, copied and moved.
#include <atomic>

namespace corio::test {

struct lifetime_counts {
  std::atomic<int> alive{0};
  std::atomic<int> copies{0};
  std::atomic<int> moves{0};
};

class counted {
 public:
  explicit counted(lifetime_counts& counts, int value = 0) : counts_(&counts), value_(value) { ++counts_->alive; }
  counted(const counted& other) : counts_(other.counts_), value_(other.value_) {
    ++counts_->alive;
    ++counts_->copies;
  }
  counted(counted&& other) noexcept : counts_(other.counts_), value_(other.value_) {
    ++counts_->alive;
    ++counts_->moves;
  }
  counted& operator=(const counted&) = delete;
  counted& operator=(counted&&) = delete;
  ~counted() { --counts_->alive; }

  int value() const noexcept { return value_; }

 private:
  lifetime_counts* counts_;
  int value_;
};

}  // namespace corio::test
