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
/// not thread-safe. Iterating an empty (moved-from) generator, calling begin() a second time, or
/// incrementing an iterator past the end throws corio::invalid_task. A const lvalue yielded by a
/// generator of a non-reference `T` is copied (the copy lives until the body resumes).
///
///     corio::generator<int> iota(int n) { for (int i = 0; i < n; ++i) co_yield i; }
///     for (int i : iota(3)) { /* 0, 1, 2 */ }
template <class T>
class [[nodiscard]] generator {
  static_assert(detail::fits_frame_alignment<T>(),
                "corio::generator<T>: a T aligned beyond the default new alignment cannot be stored in a "
                "coroutine frame (it would be misaligned)");
  using value_pointer = std::add_pointer_t<std::remove_reference_t<T>>;

 public:
  struct promise_type : detail::pooled_frame {
    value_pointer current_ = nullptr;
    std::exception_ptr error_;
    bool started_ = false;  // begin() ran

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
    /// A const lvalue (`for (const auto& s : names) co_yield s;`): the iterator hands out a `T&`, so
    /// it yields a copy, kept in the awaiter (in the frame) while the body is suspended. (A
    /// generator<const T> hands out a `const T&`: the first overload takes it.)
    struct yielded_copy {
      std::remove_cv_t<T> value;
      bool await_ready() const noexcept { return false; }
      void await_suspend(std::coroutine_handle<promise_type> self) noexcept {
        self.promise().current_ = std::addressof(value);
      }
      void await_resume() const noexcept {}
    };
    yielded_copy yield_value(const std::remove_reference_t<T>& value)
      requires(!std::is_reference_v<T> && !std::is_const_v<T> && std::is_copy_constructible_v<T>)
    {
      return {value};
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
      if (!handle_ || handle_.done()) {
        throw invalid_task("corio::generator: incrementing an iterator that is at the end");
      }
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

  /// Runs the body to its first co_yield. Call once: a generator is single pass.
  iterator begin() {
    if (!handle_) {
      throw invalid_task("corio::generator: iterating an empty (moved-from) generator");
    }
    if (std::exchange(handle_.promise().started_, true)) {
      throw invalid_task("corio::generator: begin() called a second time (a generator is single pass)");
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
