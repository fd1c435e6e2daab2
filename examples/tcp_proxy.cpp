// A TCP proxy: each client's connection is relayed to an upstream server, both ways at once.
//
//   tcp_proxy --upstream HOST:PORT [--port 7778] [--threads 1] [--backend auto|io_uring|epoll]
//             [--connect-timeout SECONDS]
//   (HOST: a name, an IPv4 address, or an IPv6 one in brackets; it is resolved for each connection, and
//   its addresses are tried in turn; --port 0: an ephemeral port, printed on the first line of output.)
//
// A half-close passes through: when one side ends its output, the proxy ends its output to the other
// side and goes on relaying the other direction. A reset or an error on either side ends both; a
// connection the upstream refuses, or that does not connect within --connect-timeout (default 5 s), is
// closed and reported on stderr.
//
// Shows: resolve and tcp_stream::connect under a deadline, two tasks sharing two streams in a
// task_scope (one reads where the other writes, on whichever workers run them; the first failure
// cancels the other), shutdown(SHUT_WR) for a half-close.
#include <corio/net/resolve.hpp>
#include <corio/net/tcp_stream.hpp>
#include <corio/scope.hpp>
#include <corio/time.hpp>

#include <sys/socket.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <system_error>

#include "example_server.hpp"

namespace {

std::string upstream_host;
std::uint16_t upstream_port = 0;
std::chrono::milliseconds connect_timeout{5000};

// One direction, until `from` ends its output; then `to` gets the half-close.
corio::task<void> pump(corio::net::tcp_stream& from, corio::net::tcp_stream& to) {
  std::array<std::byte, 16384> buffer;
  for (;;) {
    std::size_t n = co_await from.read_some(buffer);
    if (n == 0) {
      to.shutdown(SHUT_WR);
      co_return;
    }
    co_await to.write_all({buffer.data(), n});
  }
}

bool ordinary_end(const std::system_error& failure) {
  return failure.code() == std::errc::connection_reset || failure.code() == std::errc::broken_pipe ||
         failure.code() == std::errc::not_connected;
}

corio::task<void> relay(corio::net::tcp_stream client) {
  try {
    client.set_nodelay(true);
    corio::net::tcp_stream server = co_await corio::with_timeout(
        connect_timeout, corio::net::tcp_stream::connect(upstream_host, upstream_port));
    server.set_nodelay(true);
    corio::task_scope directions;  // both borrow the streams: join() waits for both on every path
    directions.spawn(pump(client, server));
    directions.spawn(pump(server, client));
    co_await directions.join();
  } catch (const std::system_error& failure) {
    if (!ordinary_end(failure)) {
      std::fprintf(stderr, "tcp_proxy: %s\n", failure.what());
    }
  } catch (const corio::timed_out&) {
    std::fprintf(stderr, "tcp_proxy: no connection to %s:%u within %lld ms\n", upstream_host.c_str(),
                 upstream_port, static_cast<long long>(connect_timeout.count()));
  }
}

// `flag`'s value "HOST:PORT", HOST in brackets when it is an IPv6 address, into the upstream's host and
// port; a bad value is a failure naming `flag`.
void parse_upstream(const example::flags& flags, std::string_view flag, std::string_view text) {
  std::size_t colon = text.rfind(':');
  std::string_view host = text.substr(0, colon);
  if (host.starts_with('[') && host.size() >= 3 && host.ends_with(']')) {
    host = host.substr(1, host.size() - 2);
  } else if (colon == std::string_view::npos || host.empty() || host.starts_with('[')) {
    flags.fail("bad value for ", flag);
  }
  upstream_port = static_cast<std::uint16_t>(flags.number<unsigned>(flag, text.substr(colon + 1), 1, 65535));
  upstream_host = host;
}

constexpr const char* usage_line =
    "usage: tcp_proxy --upstream HOST:PORT [--port N] [--threads N] [--backend auto|io_uring|epoll]\n"
    "                 [--connect-timeout SECONDS]\n";

}  // namespace

int main(int argc, char** argv) {
  example::server_settings serving{.port = 7778};
  const example::flags flags("tcp_proxy", usage_line);
  flags.parse(argc, argv, [&](std::string_view flag, std::string_view value) {
    if (serving.take(flags, flag, value)) {
      return true;
    }
    if (flag == "--upstream") {
      parse_upstream(flags, flag, value);
    } else if (flag == "--connect-timeout") {
      connect_timeout = flags.seconds(flag, value, 0.001, 3600.0);
    } else {
      return false;
    }
    return true;
  });
  if (upstream_port == 0) {
    flags.fail("missing ", "--upstream");
  }
  return example::server("tcp_proxy", relay).run(serving);
}
