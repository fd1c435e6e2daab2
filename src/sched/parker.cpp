// Futex-based parking; see include/corio/detail/parker.hpp for the protocol.
#include <corio/detail/parker.hpp>

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <ctime>
#include <thread>

namespace corio::detail {
namespace {

long futex(std::atomic<std::uint32_t>* word, int op, std::uint32_t value, const timespec* timeout) noexcept {
  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
  return ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), op | FUTEX_PRIVATE_FLAG, value, timeout,
                   nullptr, 0);
}

}  // namespace

void parker::park(std::optional<std::chrono::nanoseconds> timeout) noexcept {
  if (park_backend* backend = backend_.load(std::memory_order_relaxed)) {  // our own store
    backend->park(timeout);
    state_.store(awake, std::memory_order_relaxed);
    return;
  }
  timespec relative{};
  const timespec* limit = nullptr;
  if (timeout) {
    auto ns = timeout->count() > 0 ? timeout->count() : 0;
    relative.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
    relative.tv_nsec = static_cast<long>(ns % 1'000'000'000);
    limit = &relative;
  }
  // Returns at once (EAGAIN) if a waker already flipped the word back to awake.
  futex(&state_, FUTEX_WAIT, parked, limit);
  state_.store(awake, std::memory_order_relaxed);
}

void parker::set_backend(park_backend* backend) noexcept {
  backend_.store(backend, std::memory_order_seq_cst);
  if (backend == nullptr) {
    while (wakers_in_backend_.load(std::memory_order_seq_cst) != 0) {
      std::this_thread::yield();  // a waker is inside the old backend's wake(): a syscall at most
    }
  }
}

void parker::wake() noexcept {
  wakers_in_backend_.fetch_add(1, std::memory_order_seq_cst);  // pairs with set_backend's store, then load
  if (park_backend* backend = backend_.load(std::memory_order_seq_cst)) {
    backend->wake();
    wakers_in_backend_.fetch_sub(1, std::memory_order_seq_cst);
    return;
  }
  wakers_in_backend_.fetch_sub(1, std::memory_order_seq_cst);
  futex(&state_, FUTEX_WAKE, 1, nullptr);
}

}  // namespace corio::detail
