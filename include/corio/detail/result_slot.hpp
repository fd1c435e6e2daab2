#pragma once
// Storage for a coroutine's outcome: nothing yet, a value, or an exception.
#include <exception>
#include <memory>
#include <type_traits>
#include <utility>
#include <variant>

namespace corio::detail {

template <class T>
class result_slot {
  // References are stored as pointers; everything else by value.
  using stored = std::conditional_t<std::is_reference_v<T>, std::add_pointer_t<std::remove_reference_t<T>>, T>;

 public:
  template <class U>
  void set_value(U&& value) {
    if constexpr (std::is_reference_v<T>) {
      outcome_.template emplace<1>(std::addressof(value));
    } else {
      outcome_.template emplace<1>(std::forward<U>(value));
    }
  }
  void set_exception(std::exception_ptr error) noexcept { outcome_.template emplace<2>(std::move(error)); }
  /// The stored exception, or null.
  std::exception_ptr error() const noexcept { return outcome_.index() == 2 ? std::get<2>(outcome_) : nullptr; }

  /// Moves the value out, or moves the stored exception out and rethrows it (so the slot, which may be
  /// destroyed on another thread, no longer shares it with the thread handling it).
  T take() {
    if (outcome_.index() == 2) {
      std::rethrow_exception(std::exchange(std::get<2>(outcome_), nullptr));
    }
    if constexpr (std::is_reference_v<T>) {
      return static_cast<T>(*std::get<1>(outcome_));
    } else {
      return std::move(std::get<1>(outcome_));
    }
  }

 private:
  std::variant<std::monostate, stored, std::exception_ptr> outcome_;
};

template <>
class result_slot<void> {
 public:
  void set_exception(std::exception_ptr error) noexcept { error_ = std::move(error); }
  std::exception_ptr error() const noexcept { return error_; }
  void take() {
    if (error_) {
      std::rethrow_exception(std::exchange(error_, nullptr));
    }
  }

 private:
  std::exception_ptr error_;
};

}  // namespace corio::detail
