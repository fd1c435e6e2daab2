// A TCP echo server: every chunk a client sends comes straight back, whole.
//
//   echo_server [--port 7777] [--threads 1] [--backend auto|io_uring|epoll] [--read-timeout SECONDS]
//   (--port 0: an ephemeral port, printed on the first line of output; --read-timeout: a connection
//   idle for that long is closed, the deadline re-armed on every read; 0, the default, waits forever)
//
// Shows: tcp_listener / tcp_stream on a runtime, one SO_REUSEPORT listener and acceptor per worker,
// TCP_NODELAY, error_code forms (a client's reset ends its connection quietly), with_timeout around a
// read, and a graceful shutdown on SIGINT/SIGTERM: stop accepting, give open connections up to 2 s, exit 0.
#include <corio/net/tcp_listener.hpp>
#include <corio/net/tcp_stream.hpp>
#include <corio/runtime.hpp>
#include <corio/time.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "example_flags.hpp"

namespace {

std::atomic<int> live_connections{0};
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
  live_connections.fetch_sub(1);
}

corio::task<void> accept_loop(corio::net::tcp_listener listener) {
  for (;;) {
    std::error_code error;
    corio::net::tcp_stream client = co_await listener.accept(error);
    if (error == std::errc::operation_canceled) {
      co_return;  // shutting down
    }
    if (!error) {
      live_connections.fetch_add(1);
      corio::spawn(echo(std::move(client))).detach();
    }  // else (EMFILE, ECONNABORTED, ...): that connection is lost, the loop goes on
  }
}

constexpr const char* usage_line =
    "usage: echo_server [--port N] [--threads N] [--backend auto|io_uring|epoll] [--read-timeout SECONDS]\n";

}  // namespace

int main(int argc, char** argv) {
  unsigned port = 7777;
  unsigned threads = 1;
  corio::io_backend backend = corio::io_backend::automatic;
  const example::flags flags("echo_server", usage_line);
  flags.parse(argc, argv, [&](std::string_view flag, std::string_view value) {
    if (flag == "--port") {
      port = flags.number<unsigned>(flag, value, 0, 65535);
    } else if (flag == "--threads") {
      threads = flags.number<unsigned>(flag, value, 1, 1024);
    } else if (flag == "--read-timeout") {  // seconds, to the millisecond; at least 1 ms
      double seconds = flags.number<double>(flag, value, 0.001, 86400.0);
      read_timeout = std::chrono::milliseconds(std::lround(seconds * 1000));
    } else if (flag == "--backend") {
      backend = flags.backend(value);
    } else {
      return false;
    }
    return true;
  });

  // Signals are taken by sigwait on this thread; workers inherit the blocked mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  corio::runtime::options options;
  options.workers = threads;
  options.backend = backend;
  corio::runtime rt(options);
  corio::net::listen_options listen;
  listen.reuse_port = true;  // one listener per worker; the kernel spreads connections over them
  std::vector<corio::join_handle<void>> acceptors;
  for (unsigned i = 0; i < threads; ++i) {
    std::error_code error;
    auto listener =
        corio::net::tcp_listener::bind(corio::net::endpoint::any_v4(static_cast<std::uint16_t>(port)), listen, error);
    if (error) {
      std::fprintf(stderr, "echo_server: cannot listen on port %u: %s\n", port, error.message().c_str());
      return 1;  // ~runtime cancels the acceptors already started
    }
    port = listener.local_endpoint().port();  // --port 0: the ephemeral port chosen, shared by the rest
    acceptors.push_back(rt.spawn(accept_loop(std::move(listener))));
  }
  std::printf("echo_server: listening on port %u, %u worker(s)\n", port, threads);
  std::fflush(stdout);

  int signal = 0;
  sigwait(&stop_signals, &signal);
  for (auto& acceptor : acceptors) {  // 1. stop accepting
    acceptor.cancel();
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);  // 2. let connections finish
  while (live_connections.load() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::printf("echo_server: %s; closing %d connection(s) still open\n", strsignal(signal), live_connections.load());
  return 0;  // 3. ~runtime cancels what is left and frees it
}
