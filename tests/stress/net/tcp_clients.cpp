// The TCP round's clients (tcp_round.hpp): each connects, writes its messages from one task while it
// reads the echo on another, and checks every byte. A client's stream sits in a vector that may grow
// between its writes (moving the stream under the read in flight); operations are made under the
// vector's mutex, and a made operation no longer needs the stream object. Cancellations by handle and
// by scope, and closes from another task, are made here (the canceller); the rest come from the
// test's thread (tcp_round.cpp).
#include <corio/cancellation.hpp>
#include <corio/errors.hpp>
#include <corio/join_handle.hpp>
#include <corio/scope.hpp>
#include <corio/time.hpp>
#include <corio/when_all.hpp>

#include <sys/socket.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "stress/net/tcp_round.hpp"

namespace corio::stress {
namespace {

using corio::net::tcp_stream;
using std::chrono::microseconds;

constexpr int expiries_allowed = 5000;  // per client and direction, then operations run without deadlines
constexpr int connect_attempts_allowed = 200;

auto make_write(client_stream& stream, std::span<const std::byte> data, std::error_code& error) {
  std::lock_guard lock(stream.mutex);
  return stream.slots.front().write_all(data, error);
}

auto make_read(client_stream& stream, std::span<std::byte> into, std::error_code& error) {
  std::lock_guard lock(stream.mutex);
  return stream.slots.front().read_some(into, error);
}

auto make_read_exact(client_stream& stream, std::span<std::byte> into, std::error_code& error) {
  std::lock_guard lock(stream.mutex);
  return stream.slots.front().read_exact(into, error);
}

class client {
 public:
  client(tcp_round_state& round, std::size_t index)
      : round_(round), index_(index), plan_(round.plan.clients[index]), state_(*round.clients[index]) {}

  task<void> run() {
    state_.at = client_state::connecting;
    std::optional<tcp_stream> connected = co_await connect();
    if (!connected) {
      co_return;
    }
    std::error_code error;
    auto local = connected->local_endpoint(error);
    if (!error) {
      round_.client_of_port[local.port()] = static_cast<int>(index_);
    }
    stream_ = std::make_shared<client_stream>();
    stream_->slots.push_back(std::move(*connected));
    {
      std::lock_guard lock(state_.mutex);
      state_.stream = stream_;
    }
    state_.at = client_state::connected;
    co_await exchange();
    check_outcome();
    std::lock_guard lock(stream_->mutex);
    if (!stream_->slots.empty()) {
      stream_->slots.front().close();
    }
    state_.at = write_error_ || read_error_ ? client_state::failed : client_state::done;
  }

 private:
  task<std::optional<tcp_stream>> connect() {
    for (int attempts = 0;; ++attempts) {
      std::error_code error;
      auto connecting = tcp_stream::connect(round_.at, error);
      const bool limits_left = attempts < connect_attempts_allowed;
      tcp_stream connected = co_await within_limits<tcp_stream>(limits_left ? plan_.connect_deadline_us : 0,
                                                                limits_left ? plan_.connect_race_us : 0,
                                                                std::move(connecting), error);
      if (!error) {
        if (!connected.is_open()) {
          round_.log.fail("client %zu: connect succeeded with a closed stream", index_);
          co_return std::nullopt;
        }
        co_return std::move(connected);
      }
      if (error == std::errc::timed_out) {
        if (connected.is_open()) {
          round_.log.fail("client %zu: connect timed out but returned an open stream", index_);
        }
        continue;
      }
      if (error == std::errc::operation_canceled) {
        throw corio::cancelled();  // this task was cancelled while it connected
      }
      round_.log.fail("client %zu: connect ended with %s", index_, describe(error).c_str());
      co_return std::nullopt;
    }
  }

  // The writer in a scope (it uses this frame), the reader here; a reader that stops early stops it.
  task<void> exchange() {
    if (plan_.lockstep) {
      co_await lockstep();
      co_return;
    }
    corio::task_scope writers;
    writers.spawn(write());
    bool cancelled = false;
    try {
      co_await read();
    } catch (const corio::cancelled&) {
      cancelled = true;
    }
    if (cancelled || read_error_ || end_of_stream_) {
      writers.cancel();
    }
    co_await writers.join();
    if (cancelled) {
      throw corio::cancelled();
    }
  }

  task<void> lockstep() {
    std::vector<std::byte> echo;
    std::size_t at = 0;
    for (std::size_t end : plan_.message_ends) {
      std::span<const std::byte> message(plan_.stream.data() + at, end - at);
      echo.resize(message.size());
      std::error_code write_error;
      std::error_code read_error;
      auto writing = make_write(*stream_, message, write_error);
      auto reading = make_read_exact(*stream_, echo, read_error);
      auto [wrote, read] = co_await corio::when_all(std::move(writing), std::move(reading));
      state_.sent = at + wrote;
      if (wrote > message.size() || (!write_error && wrote != message.size())) {
        round_.log.fail("client %zu: write_all wrote %zu of %zu bytes (%s)", index_, wrote, message.size(),
                        describe(write_error).c_str());
      }
      if (read != 0 && !matches(std::span(echo.data(), read), at)) {
        read_error_ = std::make_error_code(std::errc::protocol_error);
        co_return;
      }
      if (write_error || read_error) {
        write_error_ = write_error;
        read_error_ = read_error;
        co_return;
      }
      at = end;
      state_.received = at;
    }
  }

  task<void> write() {
    random choices(index_ * 7919 + 1);
    std::size_t sent = 0;
    std::size_t message = 0;
    int expiries = 0;
    while (sent < plan_.stream.size()) {
      std::size_t end = plan_.message_ends[message];
      if (sent >= end) {
        ++message;
        continue;
      }
      std::error_code error;
      std::span<const std::byte> rest(plan_.stream.data() + sent, end - sent);
      const int limit = expiries < expiries_allowed ? plan_.write_deadline_us : 0;
      expiries += limit > 0;  // every write under a deadline counts: one may expire after sending some
      auto writing = make_write(*stream_, rest, error);
      std::size_t wrote = co_await within_deadline<std::size_t>(limit, std::move(writing), error);
      if (wrote > rest.size()) {
        round_.log.fail("client %zu: write_all says it wrote %zu of %zu bytes", index_, wrote, rest.size());
      }
      sent += wrote;
      state_.sent = sent;
      if (error == std::errc::timed_out) {
        continue;
      }
      if (error) {
        write_error_ = error;
        break;
      }
      if (wrote != rest.size()) {
        round_.log.fail("client %zu: write_all wrote %zu of %zu bytes without an error", index_, wrote, rest.size());
      }
      if (plan_.moved_between_writes && choices.chance(0.3)) {
        std::lock_guard lock(stream_->mutex);
        stream_->slots.emplace_back();  // may reallocate: the stream moves under the read in flight
      }
    }
    if (plan_.half_close || write_error_) {
      std::lock_guard lock(stream_->mutex);
      std::error_code ignored;
      stream_->slots.front().shutdown(SHUT_WR, ignored);
    }
  }

  task<void> read() {
    std::vector<std::byte> buffer(plan_.read_chunk);
    const std::size_t total = plan_.stream.size();
    std::size_t received = 0;
    int expiries = 0;
    while (plan_.half_close || received < total) {
      std::size_t wanted = plan_.half_close ? buffer.size() : std::min(buffer.size(), total - received);
      std::span<std::byte> into(buffer.data(), wanted);
      std::error_code error;
      std::size_t read = co_await read_once(into, error, expiries < expiries_allowed);
      if (error == std::errc::timed_out) {
        if (read != 0) {
          round_.log.fail("client %zu: a read timed out but returned %zu bytes", index_, read);
        }
        ++expiries;
        continue;
      }
      if (error) {
        read_error_ = error;
        co_return;
      }
      if (read == 0) {
        end_of_stream_ = true;
        co_return;
      }
      if (!matches(std::span(buffer.data(), read), received)) {
        read_error_ = std::make_error_code(std::errc::protocol_error);
        co_return;
      }
      received += read;
      state_.received = received;
    }
  }

  // One read_some, or read_exact of all of `into`, under the client's deadline and racing its sleep
  // if it has them and `limits_left`.
  task<std::size_t> read_once(std::span<std::byte> into, std::error_code& error, bool limits_left) {
    const int limit = limits_left ? plan_.read_deadline_us : 0;
    const int race = limits_left ? plan_.read_race_us : 0;
    if (plan_.read_exact) {
      auto reading = make_read_exact(*stream_, into, error);
      co_return co_await within_limits<std::size_t>(limit, race, std::move(reading), error);
    }
    auto reading = make_read(*stream_, into, error);
    co_return co_await within_limits<std::size_t>(limit, race, std::move(reading), error);
  }

  bool matches(std::span<const std::byte> read, std::size_t at) {
    if (at + read.size() > plan_.stream.size()) {
      round_.log.fail("client %zu: %zu bytes came back beyond the %zu it sent", index_,
                      at + read.size() - plan_.stream.size(), plan_.stream.size());
      return false;
    }
    auto differs = std::mismatch(read.begin(), read.end(), plan_.stream.begin() + static_cast<std::ptrdiff_t>(at));
    if (differs.first != read.end()) {
      std::size_t offset = at + static_cast<std::size_t>(differs.first - read.begin());
      round_.log.fail("client %zu: byte %zu of %zu came back as %02x, sent as %02x (a read of %zu; %llu sent; %s)",
                      index_, offset, plan_.stream.size(), static_cast<unsigned>(*differs.first),
                      static_cast<unsigned>(*differs.second), read.size(),
                      static_cast<unsigned long long>(state_.sent.load()),
                      where_sent(read.subspan(static_cast<std::size_t>(differs.first - read.begin()))).c_str());
      return false;
    }
    return true;
  }

  // Where in this client's stream the bytes that came back instead were sent: a shift says bytes were
  // lost (ahead) or repeated (behind); none, that they are not this client's.
  std::string where_sent(std::span<const std::byte> wrong) const {
    wrong = wrong.first(std::min<std::size_t>(wrong.size(), 16));
    auto found = std::search(plan_.stream.begin(), plan_.stream.end(), wrong.begin(), wrong.end());
    if (wrong.size() < 4 || found == plan_.stream.end()) {
      return "not from this client's stream";
    }
    return "they were sent at byte " + std::to_string(found - plan_.stream.begin());
  }

  void check_outcome() {
    if (read_error_ == std::errc::protocol_error) {
      return;  // reported where it was found
    }
    bool disrupted = state_.disrupted.load() || round_.anything_disrupted();
    if (disrupted) {
      if (!documented_disruption(write_error_) || !documented_disruption(read_error_)) {
        round_.log.fail("client %zu: disrupted, it ended with write %s, read %s", index_,
                        describe(write_error_).c_str(), describe(read_error_).c_str());
      }
    } else if (write_error_ || read_error_) {
      round_.log.fail("client %zu: nothing disrupted it, yet it ended with write %s, read %s", index_,
                      describe(write_error_).c_str(), describe(read_error_).c_str());
    } else if (state_.received.load() != plan_.stream.size()) {
      round_.log.fail("client %zu: %llu of %zu bytes came back (end of stream: %d)", index_,
                      static_cast<unsigned long long>(state_.received.load()), plan_.stream.size(), end_of_stream_);
    }
  }

  tcp_round_state& round_;
  std::size_t index_;
  const client_plan& plan_;
  client_state& state_;
  std::shared_ptr<client_stream> stream_;
  std::error_code write_error_;
  std::error_code read_error_;
  bool end_of_stream_ = false;
};

task<void> run_client(tcp_round_state& round, std::size_t index) {
  client_state& state = *round.clients[index];
  try {
    client body(round, index);
    co_await body.run();
  } catch (const corio::cancelled&) {
    state.at = client_state::cancelled;
    if (!state.disrupted.load() && !round.destroying.load()) {
      round.log.fail("client %zu: cancelled, though nothing cancelled it", index);
    }
  } catch (const std::exception& error) {
    if (!round.destroying.load()) {
      round.log.fail("client %zu: threw %s", index, error.what());
    }
  }
  std::shared_ptr<client_stream> stream;
  {
    std::lock_guard lock(state.mutex);
    stream = std::move(state.stream);
  }
  if (stream) {
    std::lock_guard lock(stream->mutex);
    stream->slots.clear();
  }
}

struct planned_disruption {
  std::int64_t at_us;
  std::size_t client;
};

// The disruptions made from a task: cancels by handle or scope, closes.
task<void> disrupt(tcp_round_state& round, std::vector<corio::join_handle<void>>& handles, corio::task_scope& clients) {
  std::vector<planned_disruption> planned;
  for (std::size_t index = 0; index < round.plan.clients.size(); ++index) {
    disruption kind = round.plan.clients[index].disrupted;
    if (kind == disruption::cancel_by_handle || kind == disruption::cancel_scope || kind == disruption::close_from_task) {
      planned.push_back({round.plan.clients[index].disrupted_at_us, index});
    }
  }
  std::sort(planned.begin(), planned.end(), [](auto& a, auto& b) { return a.at_us < b.at_us; });
  for (planned_disruption each : planned) {
    co_await corio::sleep_until(round.start + microseconds(each.at_us));
    round.clients[each.client]->disrupted = true;
    switch (round.plan.clients[each.client].disrupted) {
      case disruption::cancel_by_handle:
        handles[each.client].cancel();
        break;
      case disruption::cancel_scope:
        for (auto& state : round.clients) {
          state->disrupted = true;
        }
        clients.cancel();
        break;
      default:
        round.close_client(each.client, false);
        break;
    }
  }
}

task<void> run_clients(tcp_round_state& round) {
  corio::task_scope scope;
  std::vector<corio::join_handle<void>> handles;
  for (std::size_t index = 0; index < round.plan.clients.size(); ++index) {
    task<void> body = run_client(round, index);
    if (round.plan.clients[index].disrupted == disruption::cancel_by_stop_token) {
      body = corio::with_stop_token(round.clients[index]->stop.get_token(), std::move(body));
    }
    if (round.plan.clients_in_scope) {
      scope.spawn(std::move(body));
    } else {
      handles.push_back(corio::spawn(std::move(body)));
    }
  }
  co_await disrupt(round, handles, scope);
  for (auto& handle : handles) {
    try {
      co_await std::move(handle);
    } catch (const corio::cancelled&) {
    }
  }
  co_await scope.join();
}

}  // namespace

task<void> drive_clients(tcp_round_state& round) {
  try {
    co_await run_clients(round);
  } catch (const corio::cancelled&) {
  } catch (const std::exception& error) {
    if (!round.destroying.load()) {
      round.log.fail("clients: the driver threw %s", error.what());
    }
  }
  round.clients_done = true;
  --round.running;
}

}  // namespace corio::stress
