#pragma once
// corio::generator<T>: a synchronous, lazy sequence produced by co_yield, usable in range-for.
#include <coroutine>
#include <exception>
#include <iterator>
#include <memory>
#include <type_traits>
#include <utility>

#include <corio/detail/frame_pool.hpp>
#include <corio/errors.hpp>

namespace corio {

/// A lazy sequence of `T`: the body runs up to each `co_yield` as the caller advances. An exception
/// thrown by the body propagates out of the iterator increment (or begin()). Move-only, single pass,
/// not thread-safe. Iterating an empty (moved-from) generator throws corio::invalid_task.
///
///     corio::generator<int> iota(int n) { for (int i = 0; i < n; ++i) co_yield i; }
///     for (int i : iota(3)) { /* 0, 1, 2 */ }
template <class T>
class [[nodiscard]] generator {
  using value_pointer = std::add_pointer_t<std::remove_reference_t<T>>;

 public:
  struct promise_type : detail::pooled_frame {
    value_pointer current_ = nullptr;
    std::exception_ptr error_;

    generator get_return_object() noexcept {
      return generator{std::coroutine_handle<promise_type>::from_promise(*this)};
    }
    std::suspend_always initial_suspend() const noexcept { return {}; }
    std::suspend_always final_suspend() const noexcept { return {}; }
    std::suspend_always yield_value(std::remove_reference_t<T>& value) noexcept {
      current_ = std::addressof(value);
      return {};
    }
    std::suspend_always yield_value(std::remove_reference_t<T>&& value) noexcept {
      current_ = std::addressof(value);
      return {};
    }
    void return_void() const noexcept {}
    void unhandled_exception() noexcept { error_ = std::current_exception(); }
    template <class U>
    std::suspend_never await_transform(U&&) = delete;  // a generator cannot co_await
  };

  using handle_type = std::coroutine_handle<promise_type>;

  class iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using difference_type = std::ptrdiff_t;
    using value_type = std::remove_cvref_t<T>;

    iterator() noexcept = default;
    explicit iterator(handle_type handle) noexcept : handle_(handle) {}

    std::remove_reference_t<T>& operator*() const noexcept { return *handle_.promise().current_; }
    iterator& operator++() {
      advance(handle_);
      return *this;
    }
    void operator++(int) { ++*this; }
    friend bool operator==(const iterator& it, std::default_sentinel_t) noexcept {
      return !it.handle_ || it.handle_.done();
    }

   private:
    handle_type handle_;
  };

  generator() noexcept = default;
  explicit generator(handle_type handle) noexcept : handle_(handle) {}
  generator(generator&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  generator& operator=(generator other) noexcept {
    std::swap(handle_, other.handle_);
    return *this;
  }
  ~generator() {
    if (handle_) {
      handle_.destroy();
    }
  }

  /// Runs the body to its first co_yield. Call once.
  iterator begin() {
    if (!handle_) {
      throw invalid_task("corio::generator: iterating an empty (moved-from) generator");
    }
    advance(handle_);
    return iterator{handle_};
  }
  std::default_sentinel_t end() const noexcept { return {}; }

 private:
  static void advance(handle_type handle) {
    handle.resume();
    if (handle.done() && handle.promise().error_) {
      std::rethrow_exception(std::exchange(handle.promise().error_, nullptr));
    }
  }

  handle_type handle_;
};

}  // namespace corio
