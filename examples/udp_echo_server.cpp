// A UDP echo server: every datagram is sent back, whole, to the address it came from.
//
//   udp_echo_server [--port 7780] [--threads 1] [--receivers 4] [--max-bytes 65535]
//                   [--backend auto|io_uring|epoll]
//   (--port 0: an ephemeral port, printed on the first line of output.)
//
// One socket, shared by --receivers tasks that each receive a datagram and send it back, on whichever
// workers run them: each datagram goes to exactly one of them. A datagram longer than --max-bytes is
// not echoed (a cut one would look whole to its sender) but counted. SIGINT or SIGTERM stops it; it
// prints what it did ("N datagram(s) echoed, T too long, E error(s)") and exits 0.
//
// Shows: udp_socket's recv_from and send_to, several tasks receiving on one socket at once, a datagram's
// `truncated` flag, and a task_scope cancelled from outside the runtime through its parent's join_handle.
#include <corio/net/udp_socket.hpp>
#include <corio/runtime.hpp>
#include <corio/scope.hpp>
#include <corio/time.hpp>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <span>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "example_server.hpp"

namespace {

struct counters {
  std::atomic<std::uint64_t> echoed{0};
  std::atomic<std::uint64_t> too_long{0};
  std::atomic<std::uint64_t> errors{0};
  std::atomic<bool> failed{false};  // the receivers could not run: exit status 1
};

void report_error(counters& counted, const char* operation, const std::error_code& error) {
  counted.errors.fetch_add(1, std::memory_order_relaxed);
  std::fprintf(stderr, "udp_echo_server: %s: %s\n", operation, error.message().c_str());
}

corio::task<void> echo_datagrams(corio::net::udp_socket& socket, std::size_t max_bytes, counters& counted) {
  // One byte more than the longest datagram echoed, so that a datagram of exactly max_bytes is not cut.
  std::vector<std::byte> buffer(max_bytes + 1);
  for (;;) {
    std::error_code error;
    corio::net::datagram got = co_await socket.recv_from(buffer, error);
    if (error == std::errc::operation_canceled) {
      co_return;  // stopping
    }
    if (error) {
      report_error(counted, "recv_from", error);
      co_await corio::sleep_for(std::chrono::milliseconds(10));  // not a hot loop if it persists
      continue;
    }
    if (got.truncated || got.size > max_bytes) {
      counted.too_long.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    co_await socket.send_to(std::span(buffer).first(got.size), got.from, error);
    if (error == std::errc::operation_canceled) {
      co_return;
    }
    if (error) {
      report_error(counted, "send_to", error);
      continue;
    }
    counted.echoed.fetch_add(1, std::memory_order_relaxed);
  }
}

// Owns the socket: its receivers end (cancelled with this task) before it closes. A receiver that
// throws (std::system_error from an I/O backend that cannot be set up, even in the error_code forms)
// stops them all; the failure is reported and the process told to stop, exit status 1.
corio::task<void> serve(corio::net::udp_socket socket, unsigned receivers, std::size_t max_bytes, counters& counted) {
  corio::task_scope scope;
  for (unsigned i = 0; i < receivers; ++i) {
    scope.spawn(echo_datagrams(socket, max_bytes, counted));
  }
  try {
    co_await scope.join();
  } catch (const std::exception& failure) {
    std::fprintf(stderr, "udp_echo_server: %s\n", failure.what());
    counted.failed.store(true);
    ::kill(::getpid(), SIGTERM);  // to the process: main's sigwait takes it
  }
}

constexpr const char* usage_line =
    "usage: udp_echo_server [--port N] [--threads N] [--receivers N] [--max-bytes N] "
    "[--backend auto|io_uring|epoll]\n";

}  // namespace

int main(int argc, char** argv) {
  example::server_settings serving{.port = 7780};
  unsigned receivers = 4;
  std::size_t max_bytes = 65535;
  const example::flags flags("udp_echo_server", usage_line);
  flags.parse(argc, argv, [&](std::string_view flag, std::string_view value) {
    if (serving.take(flags, flag, value)) {
      return true;
    }
    if (flag == "--receivers") {
      receivers = flags.number<unsigned>(flag, value, 1, 10'000);
    } else if (flag == "--max-bytes") {
      max_bytes = flags.number<std::size_t>(flag, value, 1, 65535);
    } else {
      return false;
    }
    return true;
  });

  const example::stop_signals stopping;  // before the runtime's workers start
  corio::runtime rt(serving.runtime.options());
  std::error_code error;
  auto socket = corio::net::udp_socket::bind(corio::net::endpoint::any_v4(static_cast<std::uint16_t>(serving.port)),
                                             error);
  if (error) {
    std::fprintf(stderr, "udp_echo_server: cannot bind port %u: %s\n", serving.port, error.message().c_str());
    return 1;
  }
  const unsigned port = socket.local_endpoint().port();
  counters counted;
  corio::join_handle<void> server = rt.spawn(serve(std::move(socket), receivers, max_bytes, counted));
  std::printf("udp_echo_server: listening on port %u, %u worker(s), %u receiver(s)\n", port, serving.runtime.threads,
              receivers);
  std::fflush(stdout);

  const int signal = stopping.wait();
  server.cancel();
  try {
    corio::sync_wait(std::move(server));  // every receiver has stopped, and the socket is closed
  } catch (const corio::cancelled&) {
  }
  if (counted.failed.load()) {
    return 1;
  }
  std::printf("udp_echo_server: %s; %llu datagram(s) echoed, %llu too long, %llu error(s)\n", strsignal(signal),
              static_cast<unsigned long long>(counted.echoed.load()),
              static_cast<unsigned long long>(counted.too_long.load()),
              static_cast<unsigned long long>(counted.errors.load()));
  return 0;
}
