// Socket helpers shared by corio/net and the error categories of corio/net/error.hpp.
#include <corio/detail/socket.hpp>
#include <corio/net/error.hpp>

#include <netdb.h>
#include <sys/socket.h>

#include <cerrno>
#include <stdexcept>
#include <string>

namespace corio {
namespace detail {

int open_socket(int family, int type) noexcept {
  int fd = ::socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  return fd >= 0 ? fd : -errno;
}

accept_fd_awaiter::~accept_fd_awaiter() {
  if (stash_ != nullptr) {
    if (int handed = stash_->stop_waiting(waiter_); handed >= 0) {
      stash_->keep(handed);
    }
  }
}

void exclusive_flag::refuse(const char* what, io_kind kind) {
  if (kind == io_kind::recv) {
    throw std::logic_error(std::string(what) +
                           ": another read is in flight on this stream (one reader at a time: which bytes each "
                           "got would be arbitrary)");
  }
  throw std::logic_error(std::string(what) +
                         ": another write is in flight on this stream (one writer at a time: their bytes "
                         "would interleave)");
}

std::size_t send_all_awaiter::await_resume() {
  writer_.release();
  if (op_.result >= 0 && op_.transferred < op_.whole_size) {
    op_.result = -ECANCELED;  // stopped part-way: only a cancellation (or the executor's shutdown) does that
  }
  check();
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
