// The TCP round's echo server (tcp_round.hpp): an accept loop, and per connection either a raw echo
// (read_some, then write_all of what it read) or a framed one (read_exact of a header and its payload,
// checked, then echoed). Every operation may run under a short deadline, re-armed when it expires (a
// bounded number of times, then without one, so a round always progresses): an expired read or
// accept must have taken nothing, an expired write_all says how much it sent.
#include <corio/errors.hpp>
#include <corio/net/error.hpp>
#include <corio/scope.hpp>

#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "stress/net/tcp_round.hpp"

namespace corio::stress {
namespace {

using corio::net::tcp_stream;

constexpr int expiries_allowed = 2000;  // per connection, then operations run without deadlines
constexpr int accept_expiries_allowed = 20000;
constexpr std::uint32_t longest_frame = 256u << 10;

/// A connection's frames, as the framed server checks them: one client's, numbered from 0.
struct frame_order {
  int client = -1;
  std::uint32_t next = 0;
};

class connection {
 public:
  connection(tcp_round_state& round, server_connection& served)
      : round_(round), served_(served), stream_(served.stream), buffer_(round.plan.server_buffer + longest_frame + 8) {}

  task<void> run() {
    std::error_code ignored;
    stream_.set_nodelay(round_.plan.nodelay, ignored);
    for (;;) {
      std::size_t size = round_.plan.framed ? co_await read_frame() : co_await read_chunk();
      if (size == 0 || !co_await echo(size)) {
        co_return;
      }
    }
  }

 private:
  // The raw echo's read: the bytes read, 0 at the end (an error is checked here).
  task<std::size_t> read_chunk() {
    std::span<std::byte> into(buffer_.data(), round_.plan.server_buffer);
    for (;;) {
      std::error_code error;
      std::size_t read = co_await under_read_limits(stream_.read_some(into, error), error);
      if (error == std::errc::timed_out) {
        expired(read, "read_some");
        continue;
      }
      check_end(error);
      served_.in += read;
      co_return error ? 0 : read;
    }
  }

  // The framed echo's read: a header and its payload; their size, 0 at the end.
  task<std::size_t> read_frame() {
    if (!co_await read_exactly(std::span(buffer_.data(), 8))) {
      co_return 0;
    }
    std::uint32_t header[2];
    std::memcpy(header, buffer_.data(), sizeof header);
    if (!check_frame(header[0], header[1])) {
      co_return 0;
    }
    if (header[0] > 0 && !co_await read_exactly(std::span(buffer_.data() + 8, header[0]))) {
      co_return 0;
    }
    co_return 8 + header[0];
  }

  task<bool> read_exactly(std::span<std::byte> into) {
    for (;;) {
      std::error_code error;
      std::size_t read = co_await under_read_limits(stream_.read_exact(into, error), error);
      if (error == std::errc::timed_out) {
        expired(read, "read_exact");
        continue;
      }
      if (error) {
        check_end(error);
        co_return false;
      }
      if (read != into.size()) {
        round_.log.fail("server: read_exact read %zu of %zu bytes without an error", read, into.size());
      }
      served_.in += read;
      co_return true;
    }
  }

  bool check_frame(std::uint32_t length, std::uint32_t tag) {
    int client = static_cast<int>(tag >> 16);
    std::uint32_t number = tag & 0xffff;
    if (number != order_.next) {
      round_.log.fail("server: frame %u of client %d where frame %u was due (bytes lost or misplaced)", number,
                      client, order_.next);
    }
    order_.next = number + 1;
    if (order_.client < 0) {
      order_.client = client;
      std::error_code error;
      auto peer = stream_.peer_endpoint(error);
      int expected = error ? -1 : round_.client_of_port[peer.port()].load();
      // A disrupted client's port may serve a later client of the round before this first read.
      if (expected >= 0 && expected != client && !disrupted(expected) && !disrupted(client)) {
        round_.log.fail("server: the connection of client %d began with client %d's frame", expected, client);
      }
    } else if (client != order_.client) {
      round_.log.fail("server: a frame of client %d after frames of client %d", client, order_.client);
    }
    if (length > longest_frame) {
      round_.log.fail("server: a frame header says %u bytes (bytes lost or misplaced)", length);
      return false;
    }
    return true;
  }

  // Echoes the first `size` bytes of the buffer; false if the connection is over.
  task<bool> echo(std::size_t size) {
    std::size_t sent = 0;
    while (sent < size) {
      std::error_code error;
      std::span<const std::byte> rest(buffer_.data() + sent, size - sent);
      const int limit = deadline_us(round_.plan.server_write_deadline_us);
      expiries_ += limit > 0;  // every write under a deadline counts: one may expire after sending some
      auto writing = stream_.write_all(rest, error);
      std::size_t wrote = co_await within_deadline<std::size_t>(limit, std::move(writing), error);
      if (wrote > rest.size()) {
        round_.log.fail("server: write_all says it wrote %zu of %zu bytes", wrote, rest.size());
      }
      sent += wrote;
      served_.out += wrote;
      if (error == std::errc::timed_out) {
        continue;
      }
      if (error) {
        check_end(error);
        co_return false;
      }
      if (wrote != rest.size()) {
        round_.log.fail("server: write_all wrote %zu of %zu bytes without an error", wrote, rest.size());
      }
    }
    co_return true;
  }

  bool disrupted(int client) const {
    return client < 0 || static_cast<std::size_t>(client) >= round_.clients.size() ||
           round_.clients[static_cast<std::size_t>(client)]->disrupted.load();
  }

  // The deadline an operation runs under, or the sleep a read races: the planned one until the
  // connection used up its expiries.
  int deadline_us(int planned) const { return expiries_ < expiries_allowed ? planned : 0; }

  // A read (read_some or read_exact) under the server's read deadline and racing its sleep.
  template <class Reading>
  task<std::size_t> under_read_limits(Reading reading, std::error_code& error) {
    return within_limits<std::size_t>(deadline_us(round_.plan.server_read_deadline_us),
                                      deadline_us(round_.plan.server_read_race_us), std::move(reading), error);
  }

  void expired(std::size_t read, const char* operation) {
    if (read != 0) {
      round_.log.fail("server: %s timed out but returned %zu bytes", operation, read);
    }
    ++expiries_;
  }

  void check_end(const std::error_code& error) {
    if (!documented_disruption(error)) {
      round_.log.fail("server: a connection ended with %s", describe(error).c_str());
    }
  }

  tcp_round_state& round_;
  server_connection& served_;
  tcp_stream& stream_;
  std::vector<std::byte> buffer_;
  frame_order order_;
  int expiries_ = 0;
};

task<void> serve_connection(tcp_round_state& round, std::shared_ptr<server_connection> served) {
  try {
    connection handler(round, *served);
    co_await handler.run();
  } catch (const corio::cancelled&) {
  } catch (const std::exception& error) {
    if (!round.destroying.load()) {
      round.log.fail("server: a connection threw %s", error.what());
    }
  }
  {
    std::lock_guard lock(served->mutex);
    served->stream.close();
  }
  --round.connections_open;
  --round.running;
}

task<void> accept_loop(tcp_round_state& round, executor_under_test* elsewhere, random& choices) {
  corio::task_scope scope;
  int expiries = 0;
  const int deadline_us = round.plan.accept_deadline_us;
  for (;;) {
    std::error_code error;
    auto accepting = round.listener.accept(error);
    const bool limits_left = expiries < accept_expiries_allowed;
    tcp_stream accepted = co_await within_limits<tcp_stream>(
        limits_left ? deadline_us : 0, limits_left ? round.plan.accept_race_us : 0, std::move(accepting), error);
    if (error == std::errc::timed_out) {
      if (accepted.is_open()) {
        round.log.fail("server: an accept timed out but returned a connection");
      }
      ++expiries;
      if (round.listener_closing.load()) {
        break;
      }
      continue;
    }
    if (error) {
      bool closed = round.listener_closing.load() || round.destroying.load();
      // README, Networking: on io_uring, a listener's accepts come from its home's multishot accept,
      // so an accept loop on the other executor is refused (the first one to accept is the home).
      bool refused_elsewhere = round.plan.accept_on_both && error == corio::net::errc::served_by_another_reactor;
      bool ended_by_close =
          closed && (error == std::errc::operation_canceled || error == std::errc::bad_file_descriptor);
      if (!refused_elsewhere && !ended_by_close) {
        round.log.fail("server: accept ended with %s (listener closing: %d)", describe(error).c_str(), closed);
      }
      break;
    }
    if (!accepted.is_open()) {
      round.log.fail("server: accept returned a closed stream without an error");
      continue;
    }
    auto served = std::make_shared<server_connection>();
    served->stream = std::move(accepted);
    {
      std::lock_guard lock(round.connections_mutex);
      round.connections.push_back(served);
    }
    ++round.connections_open;
    ++round.running;
    if (elsewhere != nullptr && choices.chance(0.5)) {
      elsewhere->spawn(serve_connection(round, std::move(served)));  // dropped if it is being destroyed
    } else if (round.plan.connections_in_scope) {
      scope.spawn(serve_connection(round, std::move(served)));
    } else {
      corio::spawn(serve_connection(round, std::move(served))).detach();
    }
  }
  co_await scope.join();
}

}  // namespace

task<void> serve(tcp_round_state& round, executor_under_test* elsewhere) {
  random choices(round.plan.clients.size());
  try {
    co_await accept_loop(round, round.plan.serve_elsewhere ? elsewhere : nullptr, choices);
  } catch (const corio::cancelled&) {
  } catch (const std::exception& error) {
    if (!round.destroying.load()) {
      round.log.fail("server: the accept loop threw %s", error.what());
    }
  }
  --round.running;
}

}  // namespace corio::stress
