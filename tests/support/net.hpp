#pragma once
// Test helpers for the reactor and networking suites: the two backends as gtest types, loops and
// runtimes that use a given backend, and small loopback building blocks.
#include <corio/detail/io_slot.hpp>
#include <corio/event_loop.hpp>
#include <corio/io_backend.hpp>
#include <corio/join_handle.hpp>
#include <corio/net/endpoint.hpp>
#include <corio/net/tcp_listener.hpp>
#include <corio/net/tcp_stream.hpp>
#include <corio/net/udp_socket.hpp>
#include <corio/runtime.hpp>
#include <corio/task.hpp>
#include <corio/time.hpp>

#include <gtest/gtest.h>
#include <linux/io_uring.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "support/loops.hpp"

namespace corio::test {

/// 0 if this machine can set up an io_uring, else the errno of io_uring_setup.
inline int io_uring_setup_error() noexcept {
  io_uring_params params{};
  long fd = ::syscall(__NR_io_uring_setup, 2, &params);
  if (fd < 0) {
    return errno;
  }
  ::close(static_cast<int>(fd));
  return 0;
}

// `multishot`: the CORIO_URING_MULTISHOT its test runs under (null: unset, the default: reads
// single-shot on the registered file; "all": reads from a multishot recv into provided buffers).
struct uring_backend {
  static constexpr io_backend value = io_backend::io_uring;
  static constexpr const char* multishot = nullptr;
};
struct uring_multishot_backend {
  static constexpr io_backend value = io_backend::io_uring;
  static constexpr const char* multishot = "all";
};
struct uring_single_shot_backend {
  static constexpr io_backend value = io_backend::io_uring;
  static constexpr const char* multishot = "0";
};
struct epoll_backend {
  static constexpr io_backend value = io_backend::epoll;
  static constexpr const char* multishot = nullptr;
};
using both_backends = ::testing::Types<uring_backend, epoll_backend>;
/// For the multishot read path's own tests.
using multishot_backends = ::testing::Types<uring_multishot_backend, epoll_backend>;
/// Both of io_uring's read paths, and epoll.
using every_read_path = ::testing::Types<uring_backend, uring_multishot_backend, epoll_backend>;
/// io_uring's multishot and single-shot accepts, and epoll.
using every_accept_path = ::testing::Types<uring_backend, uring_single_shot_backend, epoll_backend>;

struct backend_names {
  template <class T>
  static std::string GetName(int) {
    std::string name(to_string(T::value));
    if constexpr (T::multishot != nullptr) {
      name += T::multishot == std::string_view("0") ? "_single_shot" : "_multishot";
    }
    return name;
  }
};

/// Base fixture: skips the io_uring instantiation where no ring can be set up (a genuinely missing
/// kernel feature; the fallback test covers that machine), and records the backend under test.
template <class Backend>
class backend_test : public ::testing::Test {
 protected:
  static constexpr io_backend backend = Backend::value;
  void SetUp() override {
    if (backend == io_backend::io_uring && io_uring_setup_error() != 0) {
      GTEST_SKIP() << "io_uring cannot be set up on this machine";
    }
    if constexpr (Backend::multishot != nullptr) {
      ::setenv("CORIO_URING_MULTISHOT", Backend::multishot, 1);  // read by each reactor as it is made
    }
  }
  void TearDown() override {
    if constexpr (Backend::multishot != nullptr) {
      ::unsetenv("CORIO_URING_MULTISHOT");
    }
  }
};

/// Raises this process's RLIMIT_NOFILE to at least `needed` for its lifetime (the soft limit, and the
/// hard one if it is lower, which needs CAP_SYS_RESOURCE); raised() says whether that worked.
class descriptor_limit {
 public:
  explicit descriptor_limit(rlim_t needed) {
    if (::getrlimit(RLIMIT_NOFILE, &original_) != 0) {
      return;
    }
    rlimit wanted = original_;
    wanted.rlim_cur = std::max(wanted.rlim_cur, needed);
    wanted.rlim_max = std::max(wanted.rlim_max, wanted.rlim_cur);
    raised_ = ::setrlimit(RLIMIT_NOFILE, &wanted) == 0;
  }
  ~descriptor_limit() {
    if (raised_) {
      ::setrlimit(RLIMIT_NOFILE, &original_);
    }
  }
  descriptor_limit(const descriptor_limit&) = delete;
  descriptor_limit& operator=(const descriptor_limit&) = delete;
  bool raised() const noexcept { return raised_; }

 private:
  rlimit original_{};
  bool raised_ = false;
};

/// Runs `body()` on a loop with `backend`, driven by run() on this thread until the body finishes.
template <class Body>
void run_on_loop(io_backend backend, Body body) {
  event_loop loop(backend);
  run_on(loop, std::move(body));
}

inline runtime::options runtime_options(io_backend backend, std::size_t workers = 2) {
  runtime::options options;
  options.workers = workers;
  options.backend = backend;
  return options;
}

inline std::span<const std::byte> bytes(std::string_view text) { return std::as_bytes(std::span(text)); }

inline std::string text(std::span<const std::byte> data) {
  return std::string(reinterpret_cast<const char*>(data.data()), data.size());
}

/// A connected pair on loopback: {client, server}.
inline task<std::pair<net::tcp_stream, net::tcp_stream>> connected_pair() {
  auto listener = net::tcp_listener::bind(net::endpoint::loopback_v4(0));
  auto client = co_await net::tcp_stream::connect(listener.local_endpoint());
  net::tcp_stream server = co_await listener.accept();
  co_return std::pair{std::move(client), std::move(server)};
}

/// Echoes every chunk it reads back whole until the peer closes.
inline task<void> echo_connection(net::tcp_stream stream) {
  std::byte buffer[4096];
  for (;;) {
    std::size_t n = co_await stream.read_some(buffer);
    if (n == 0) {
      co_return;
    }
    co_await stream.write_all(std::span<const std::byte>(buffer, n));
  }
}

/// Sends `message` on `stream` and reads the same number of bytes back.
inline task<std::string> round_trip(net::tcp_stream& stream, std::string message) {
  co_await stream.write_all(bytes(message));
  std::string reply(message.size(), '\0');
  co_await stream.read_exact(std::as_writable_bytes(std::span(reply)));
  co_return reply;
}

/// This loop's or worker's reactor's registered file table (io_uring; 0 on epoll) once it reaches
/// `expected`, or as it is after about 200 ms: a reactor lets go of a socket closed on another thread
/// at its next turn, not during the close.
inline task<std::size_t> registered_files_settled_at(std::size_t expected) {
  detail::io_slot& slot = *detail::current_io_slot;
  for (int turn = 0; turn < 200 && slot.registered_files() != expected; ++turn) {
    co_await sleep_for(std::chrono::milliseconds(1));
  }
  co_return slot.registered_files();
}

/// One read_some (into 16 bytes) in its error_code form: the error it stored.
inline task<std::error_code> read_once(net::tcp_stream& stream) {
  std::byte buffer[16];
  std::error_code error;
  co_await stream.read_some(buffer, error);
  co_return error;
}

/// write_all of `data` in its error_code form: the error it stored.
inline task<std::error_code> write_everything(net::tcp_stream& stream, std::span<const std::byte> data) {
  std::error_code error;
  co_await stream.write_all(data, error);
  co_return error;
}

/// One recv_from (into 64 bytes) in its error_code form: the error it stored.
inline task<std::error_code> receive_once(net::udp_socket& socket) {
  std::byte buffer[64];
  std::error_code error;
  co_await socket.recv_from(buffer, error);
  co_return error;
}

/// One accept in its error_code form: the error it stored (the stream it accepted, if any, is closed).
inline task<std::error_code> accept_once(net::tcp_listener& listener) {
  std::error_code error;
  co_await listener.accept(error);
  co_return error;
}

/// Connects, sends `message`, reads the same number of bytes back.
inline task<std::string> echo_once(net::endpoint server, std::string message) {
  auto stream = co_await net::tcp_stream::connect(server);
  co_return co_await round_trip(stream, std::move(message));
}

}  // namespace corio::test
