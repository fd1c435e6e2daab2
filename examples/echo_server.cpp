// A TCP echo server: every chunk a client sends comes straight back, whole.
//
//   echo_server [--port 7777] [--threads 1] [--backend auto|io_uring|epoll] [--read-timeout SECONDS]
//   (--port 0: an ephemeral port, printed on the first line of output; --read-timeout: a connection
//   that sends nothing for that long is closed, the deadline re-armed on every read; 0, the default,
//   waits forever. It bounds reads only: a client that sends but never reads its echoes holds its
//   connection, its write waiting for room, until shutdown.)
//
// Shows: tcp_stream on a runtime, TCP_NODELAY, error_code forms (a client's reset ends its connection
// quietly) and with_timeout around a read; the listeners, the accept loop and the graceful shutdown on
// SIGINT/SIGTERM are example_server.hpp's, shared with the other servers.
#include <corio/net/tcp_stream.hpp>
#include <corio/time.hpp>

#include <chrono>
#include <string_view>
#include <system_error>

#include "example_server.hpp"

namespace {

std::chrono::milliseconds read_timeout{0};  // 0: none

// The per-connection loop.
corio::task<void> echo(corio::net::tcp_stream stream) {
  stream.set_nodelay(true);
  std::byte buffer[4096];
  std::error_code error;
  for (;;) {
    std::size_t n = read_timeout.count() == 0
                         ? co_await stream.read_some(buffer, error)
                         : co_await corio::with_timeout(read_timeout, stream.read_some(buffer, error));
    if (n == 0 || error) {
      break;  // the client closed (or reset) its side, or was idle too long (errc::timed_out)
    }
    co_await stream.write_all({buffer, n}, error);
    if (error) {
      break;
    }
  }
}

constexpr const char* usage_line =
    "usage: echo_server [--port N] [--threads N] [--backend auto|io_uring|epoll] [--read-timeout SECONDS]\n";

}  // namespace

int main(int argc, char** argv) {
  example::server_settings serving{.port = 7777};
  const example::flags flags("echo_server", usage_line);
  flags.parse(argc, argv, [&](std::string_view flag, std::string_view value) {
    if (serving.take(flags, flag, value)) {
      return true;
    }
    if (flag == "--read-timeout") {  // 0: none
      read_timeout = flags.seconds(flag, value, 0.0);
    } else {
      return false;
    }
    return true;
  });
  return example::server("echo_server", echo).run(serving);
}
