// Socket helpers shared by corio/net and the error categories of corio/net/error.hpp.
#include <corio/detail/socket.hpp>
#include <corio/net/error.hpp>

#include <netdb.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "io/fd_records.hpp"

namespace corio {
namespace detail {

int open_socket(int family, int type) noexcept {
  int fd = ::socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  return fd >= 0 ? fd : -errno;
}

accept_fd_awaiter::~accept_fd_awaiter() {
  const int handed = stash_ != nullptr ? stash_->stop_waiting(waiter_) : -1;
  const bool unclaimed = !resumed_ && op_.state.load(std::memory_order_acquire) == io_state::done && op_.result >= 0;
  for (int fd : {handed, unclaimed ? op_.result : -1}) {
    if (fd < 0) {
      continue;
    }
    if (stash_ != nullptr) {
      stash_->keep(fd);
    } else {
      close_socket(fd);
    }
  }
}

namespace {

std::atomic<std::uint64_t>& direction_of(const io_request& op) noexcept {
  return op.kind == io_kind::recv ? op.record->reading : op.record->writing;
}

std::uint64_t holder_value(const io_request& op) noexcept { return std::uint64_t{op.generation} + 1; }

}  // namespace

void exclusive_claim::take_direction(const io_request& op, const char* what) {
  std::atomic<std::uint64_t>& flag = direction_of(op);
  const std::uint64_t mine = holder_value(op);
  std::uint64_t seen = flag.load(std::memory_order_relaxed);
  do {
    if (seen == mine) {
      if (op.kind == io_kind::recv) {
        throw std::logic_error(std::string(what) +
                               ": another read is in flight on this stream (one reader at a time: which bytes "
                               "each got would be arbitrary)");
      }
      throw std::logic_error(std::string(what) +
                             ": another write is in flight on this stream (one writer at a time: their bytes "
                             "would interleave)");
    }
    // Free, or left by an earlier socket of the number, whose late release will not match `mine`.
  } while (!flag.compare_exchange_weak(seen, mine, std::memory_order_acquire, std::memory_order_relaxed));
}

void exclusive_claim::release_direction(const io_request& op) noexcept {
  std::uint64_t mine = holder_value(op);
  direction_of(op).compare_exchange_strong(mine, 0, std::memory_order_release, std::memory_order_relaxed);
}

std::size_t send_all_awaiter::await_resume() {
  if (op_.result >= 0 && op_.transferred < op_.whole_size) {
    op_.result = -ECANCELED;  // stopped part-way: only a cancellation (or the executor's shutdown) does that
  }
  check_claimed();
  return op_.transferred;
}

}  // namespace detail

namespace net {
namespace {

class net_error_category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "corio.net"; }
  std::string message(int value) const override {
    switch (static_cast<errc>(value)) {
      case errc::end_of_stream:
        return "end of stream (the peer closed the connection)";
      case errc::served_by_another_reactor:
        return "the socket is served by another event loop's or runtime's io_uring reactor";
    }
    return "unknown corio.net error";
  }
};

class resolve_error_category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "getaddrinfo"; }
  std::string message(int value) const override { return ::gai_strerror(value); }
};

}  // namespace

const std::error_category& net_category() noexcept {
  static const net_error_category category;
  return category;
}

const std::error_category& resolve_category() noexcept {
  static const resolve_error_category category;
  return category;
}

}  // namespace net
}  // namespace corio
