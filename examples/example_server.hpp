// The server side shared by the networking examples (echo_server, tcp_proxy, chat_server): one
// listener and acceptor per worker (SO_REUSEPORT when there are several), an accept loop that backs off
// while the process is out of descriptors, each connection a task of its own, and a graceful shutdown
// on SIGINT/SIGTERM: stop accepting, give open connections up to 2 s, exit 0. An acceptor that fails
// (an I/O backend that cannot be set up) stops the server with a message and exit status 1.
#pragma once
#include <corio/net/tcp_listener.hpp>
#include <corio/net/tcp_stream.hpp>
#include <corio/runtime.hpp>
#include <corio/time.hpp>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "example_flags.hpp"
#include "example_signals.hpp"

namespace example {

/// The flags every server example takes: --port, --threads, --backend.
struct server_settings {
  unsigned port;
  runtime_settings runtime = {};

  /// Takes `flag` if it is one of these; false for any other.
  bool take(const flags& parsing, std::string_view flag, std::string_view value) {
    if (flag == "--port") {
      port = parsing.number<unsigned>(flag, value, 0, 65535);
      return true;
    }
    return runtime.take(parsing, flag, value);
  }
};

/// What a server runs for each accepted connection.
using connection_handler = std::function<corio::task<void>(corio::net::tcp_stream)>;

class server {
 public:
  server(std::string program, connection_handler handler) : program_(std::move(program)), handler_(std::move(handler)) {}

  /// Serves on `settings.port` (0: an ephemeral one, printed as "<program>: listening on port N, T
  /// worker(s)") until SIGINT or SIGTERM; returns the process's exit status (0, or 1 when it could not
  /// serve).
  int run(const server_settings& settings) {
    unsigned port = settings.port;
    const unsigned threads = settings.runtime.threads;
    const stop_signals stopping;  // before the runtime's workers start

    corio::runtime rt(settings.runtime.options());
    corio::net::listen_options listen;
    listen.reuse_port = threads > 1;  // one listener per worker; the kernel spreads connections over them
    std::vector<corio::join_handle<void>> acceptors;
    for (unsigned i = 0; i < threads; ++i) {
      std::error_code error;
      auto listener = corio::net::tcp_listener::bind(
          corio::net::endpoint::any_v4(static_cast<std::uint16_t>(port)), listen, error);
      if (error) {
        std::fprintf(stderr, "%s: cannot listen on port %u: %s\n", program_.c_str(), port, error.message().c_str());
        return 1;  // ~runtime cancels the acceptors already started
      }
      port = listener.local_endpoint().port();  // --port 0: the ephemeral port chosen, shared by the rest
      acceptors.push_back(rt.spawn(serve(std::move(listener))));
    }
    std::printf("%s: listening on port %u, %u worker(s)\n", program_.c_str(), port, threads);
    std::fflush(stdout);

    const int signal = stopping.wait();
    for (auto& acceptor : acceptors) {  // 1. stop accepting
      acceptor.cancel();
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);  // 2. let connections finish
    while (live_connections_.load() > 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (failed_.load()) {
      return 1;  // serve() said why; ~runtime cancels the rest
    }
    std::printf("%s: %s; closing %d connection(s) still open\n", program_.c_str(), strsignal(signal),
                live_connections_.load());
    return 0;  // 3. ~runtime cancels what is left and frees it
  }

 private:
  // Errors that say the process or the kernel is short of something (descriptors, buffer memory): the
  // pending connection stays queued in the kernel, so retrying at once would spin. Others end one
  // connection (the client reset it before it was accepted) and the loop goes on at once.
  static bool out_of_resources(const std::error_code& error) {
    return error == std::errc::too_many_files_open || error == std::errc::too_many_files_open_in_system ||
           error == std::errc::no_buffer_space || error == std::errc::not_enough_memory;
  }

  // One connection's task, counted while it runs (however it ends: cancelled at shutdown included).
  corio::task<void> handle(corio::net::tcp_stream client) {
    struct counted {
      std::atomic<int>& live;
      ~counted() { live.fetch_sub(1); }
    } count{live_connections_};
    co_await handler_(std::move(client));
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
        live_connections_.fetch_add(1);
        corio::spawn(handle(std::move(client))).detach();
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
      if (!failed_.exchange(true)) {  // every worker's acceptor fails alike: one message
        std::fprintf(stderr, "%s: %s\n", program_.c_str(), failure.what());
        ::kill(::getpid(), SIGTERM);  // to the process: run()'s sigwait takes it
      }
    }
  }

  std::string program_;
  connection_handler handler_;
  std::atomic<int> live_connections_{0};
  std::atomic<bool> failed_{false};  // an acceptor failed: exit status 1
};

}  // namespace example
