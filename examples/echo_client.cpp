// A TCP echo client: several connections, each sending messages one at a time and checking every echo.
//
//   echo_client --port N [--host 127.0.0.1] [--connections 10] [--messages 1000] [--bytes 128]
//               [--threads 1] [--backend auto|io_uring|epoll] [--timeout SECONDS]
//
// Prints how many requests were echoed and how fast, and exits 0 when every echo matched what was sent;
// the first failure (a refused connect, a mismatched echo, an early end of stream, a deadline) is
// printed and ends every connection, exit 1; a bad flag, exit 2.
//
// Shows: resolve, tcp_stream::connect to a name's addresses in turn, write_all and read_exact each under a deadline, and a
// task_scope of connections on a runtime whose first failure cancels the others.
#include <corio/net/resolve.hpp>
#include <corio/net/tcp_stream.hpp>
#include <corio/runtime.hpp>
#include <corio/scope.hpp>
#include <corio/time.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "example_flags.hpp"

namespace {

struct settings : example::client_settings {
  unsigned connections = 10;
  unsigned messages = 1000;
  std::size_t bytes = 128;
  std::chrono::milliseconds timeout{5000};
};

// Message `sequence` of connection `id`: bytes that differ between connections and messages, so an
// echo sent to the wrong connection, or an old one, does not match.
void fill(std::vector<std::byte>& message, unsigned id, unsigned sequence) {
  for (std::size_t i = 0; i < message.size(); ++i) {
    message[i] = static_cast<std::byte>((id * 131 + sequence * 7 + i) % 251);
  }
}

// One connection to the first of `server`'s addresses that accepts.
corio::task<void> converse(settings run, std::vector<corio::net::endpoint> server, unsigned id) {
  corio::net::tcp_stream stream = co_await corio::with_timeout(run.timeout, corio::net::tcp_stream::connect(server));
  stream.set_nodelay(true);
  std::vector<std::byte> sent(run.bytes);
  std::vector<std::byte> echoed(run.bytes);
  for (unsigned sequence = 0; sequence < run.messages; ++sequence) {
    fill(sent, id, sequence);
    co_await corio::with_timeout(run.timeout, stream.write_all(sent));
    co_await corio::with_timeout(run.timeout, stream.read_exact(echoed));
    if (echoed != sent) {
      throw std::runtime_error("connection " + std::to_string(id) + ", message " + std::to_string(sequence) +
                               ": the echo differs from what was sent");
    }
  }
}

corio::task<void> run_all(const settings& run) {
  std::vector<corio::net::endpoint> server = co_await corio::net::resolve(run.host, run.port);  // once for all
  corio::task_scope connections;
  for (unsigned id = 0; id < run.connections; ++id) {
    connections.spawn(converse(run, server, id));
  }
  co_await connections.join();
}

constexpr const char* usage_line =
    "usage: echo_client --port N [--host NAME] [--connections N] [--messages N] [--bytes N] [--threads N]\n"
    "                   [--backend auto|io_uring|epoll] [--timeout SECONDS]\n";

}  // namespace

int main(int argc, char** argv) {
  settings run;
  const example::flags flags("echo_client", usage_line);
  flags.parse(argc, argv, [&](std::string_view flag, std::string_view value) {
    if (run.take(flags, flag, value)) {
      return true;
    }
    if (flag == "--connections") {
      run.connections = flags.number<unsigned>(flag, value, 1, 100'000);
    } else if (flag == "--messages") {
      run.messages = flags.number<unsigned>(flag, value, 1, 1'000'000'000);
    } else if (flag == "--bytes") {
      run.bytes = flags.number<std::size_t>(flag, value, 1, 64 << 20);
    } else if (flag == "--timeout") {
      run.timeout = flags.seconds(flag, value, 0.001);
    } else {
      return false;
    }
    return true;
  });
  run.require_port(flags);

  corio::runtime rt(run.runtime.options());
  auto start = std::chrono::steady_clock::now();
  try {
    rt.block_on(run_all(run));
  } catch (const std::exception& failure) {
    std::fprintf(stderr, "echo_client: %s\n", failure.what());
    return 1;
  }
  std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  double requests = static_cast<double>(run.connections) * run.messages;
  std::printf("echo_client: %u connection(s) x %u message(s) of %zu bytes echoed in %.3f s (%.0f requests/s)\n",
              run.connections, run.messages, run.bytes, took.count(), requests / std::max(took.count(), 1e-9));
  return 0;
}
