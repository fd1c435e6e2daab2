// A TCP echo server: every chunk a client sends comes straight back, whole.
//
//   echo_server [--port 7777] [--threads 1] [--backend auto|io_uring|epoll] [--read-timeout SECONDS]
//   (--port 0: an ephemeral port, printed on the first line of output; --read-timeout: a connection
//   that sends nothing for that long is closed, the deadline re-armed on every read; 0, the default,
//   waits forever. It bounds reads only: a client that sends but never reads its echoes holds its
//   connection, its write waiting for room, until shutdown.)
//
// Shows: tcp_listener / tcp_stream on a runtime, one listener and acceptor per worker (SO_REUSEPORT
// when there are several), TCP_NODELAY, error_code forms (a client's reset ends its connection
// quietly), with_timeout around a read, an accept loop that backs off while the process is out of
// descriptors, and a graceful shutdown on SIGINT/SIGTERM: stop accepting, give open connections up to
// 2 s, exit 0. An acceptor that fails (an I/O backend that cannot be set up) stops the server with a
// message and exit status 1.
#include <corio/net/tcp_listener.hpp>
#include <corio/net/tcp_stream.hpp>
#include <corio/runtime.hpp>
#include <corio/time.hpp>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "example_flags.hpp"

namespace {

std::atomic<int> live_connections{0};
std::atomic<bool> failed{false};  // an acceptor failed: exit status 1
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

// Errors that say the process or the kernel is short of something (descriptors, buffer memory): the
// pending connection stays queued in the kernel, so retrying at once would spin. Others end one
// connection (the client reset it before it was accepted) and the loop goes on at once.
bool out_of_resources(const std::error_code& error) {
  return error == std::errc::too_many_files_open || error == std::errc::too_many_files_open_in_system ||
         error == std::errc::no_buffer_space || error == std::errc::not_enough_memory;
}

corio::task<void> accept_loop(corio::net::tcp_listener listener) {
  constexpr std::chrono::milliseconds first_backoff{5};
  constexpr std::chrono::milliseconds longest_backoff{1000};
  std::chrono::milliseconds backoff = first_backoff;
  for (;;) {
    std::error_code error;
    corio::net::tcp_stream client = co_await listener.accept(error);
    if (error == std::errc::operation_canceled) {
      co_return;  // shutting down
    }
    if (!error) {
      backoff = first_backoff;
      live_connections.fetch_add(1);
      corio::spawn(echo(std::move(client))).detach();
    } else if (out_of_resources(error)) {
      co_await corio::sleep_for(backoff);  // until descriptors free up, as Go's net/http backs off
      backoff = std::min(backoff * 2, longest_backoff);
    }
  }
}

// An acceptor that threw (std::system_error from an I/O backend that cannot be set up, even in the
// error_code forms: a configuration error, not an operation's): report it and stop the server.
corio::task<void> serve(corio::net::tcp_listener listener) {
  try {
    co_await accept_loop(std::move(listener));
  } catch (const std::exception& failure) {
    if (!failed.exchange(true)) {  // every worker's acceptor fails alike: one message
      std::fprintf(stderr, "echo_server: %s\n", failure.what());
      ::kill(::getpid(), SIGTERM);  // to the process: main's sigwait takes it
    }
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
    } else if (flag == "--read-timeout") {  // seconds, to the millisecond: 0 (none), or at least 1 ms
      double seconds = flags.number<double>(flag, value, 0.0, 86400.0);
      if (seconds > 0 && seconds < 0.001) {
        flags.fail("bad value for ", flag);
      }
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
  std::signal(SIGPIPE, SIG_IGN);  // stdout's reader gone (echo_server | head -1): a failed print, not death

  corio::runtime::options options;
  options.workers = threads;
  options.backend = backend;
  corio::runtime rt(options);
  corio::net::listen_options listen;
  listen.reuse_port = threads > 1;  // one listener per worker; the kernel spreads connections over them
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
    acceptors.push_back(rt.spawn(serve(std::move(listener))));
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
  if (failed.load()) {
    return 1;  // serve() said why; ~runtime cancels the rest
  }
  std::printf("echo_server: %s; closing %d connection(s) still open\n", strsignal(signal), live_connections.load());
  return 0;  // 3. ~runtime cancels what is left and frees it
}
