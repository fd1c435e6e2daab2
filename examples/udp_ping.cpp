// A UDP ping against an echo server (udp_echo_server): each flow sends numbered pings from a socket of
// its own, one every --interval, and waits up to --timeout for each one's echo.
//
//   udp_ping --port N [--host 127.0.0.1] [--count 10] [--flows 1] [--interval SECONDS] [--timeout SECONDS]
//            [--size 64] [--threads 1] [--backend auto|io_uring|epoll]
//   (--interval: 1 s by default, 0 sends each ping as soon as the previous one was answered or given up;
//   --timeout: 1 s by default; --size: 16 to 65507 bytes; --count is per flow. HOST: a name or a numeric
//   address; its first address is used.)
//
// Prints one summary line, "udp_ping: S sent, R received, L lost (P%), A late, X stray, F refused; rtt
// min/median/p99/max ... ms", and exits 0 when every ping was answered in time, 1 otherwise (or when the
// host cannot be resolved); a bad flag, exit 2. An echo that comes after its ping's timeout is counted
// late (so is a second echo of one ping); a datagram from the server that is no echo of a ping this run
// sent is counted stray; neither is taken for the answer the flow waits for. Each flow's socket is
// connected to the server, so the kernel drops datagrams from anyone else, and a ping to a port where
// nothing listens is refused (the ICMP error the kernel reports): lost at once, without its timeout.
//
// Shows: a connected udp_socket's send and recv, each receive under what is left of a deadline
// (with_timeout with an error_code: std::errc::timed_out), std::errc::connection_refused, a paced
// loop on sleep_until, and a task_scope of flows on a runtime.
#include <corio/net/resolve.hpp>
#include <corio/net/udp_socket.hpp>
#include <corio/runtime.hpp>
#include <corio/scope.hpp>
#include <corio/time.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "example_flags.hpp"

namespace {

struct settings : example::client_settings {
  std::uint32_t count = 10;
  unsigned flows = 1;
  std::chrono::milliseconds interval{1000};
  std::chrono::milliseconds timeout{1000};
  std::size_t size = 64;
};

struct flow_result {
  std::uint64_t sent = 0;
  std::uint64_t received = 0;
  std::uint64_t late = 0;
  std::uint64_t stray = 0;
  std::uint64_t refused = 0;
  std::vector<double> rtt_ms;
};

// A ping: the run's nonce, the flow and the sequence number, then bytes that depend on all three, so
// that an echo of another run's, flow's or ping's datagram, or a damaged one, does not match.
struct ping_id {
  std::uint64_t nonce;
  std::uint32_t flow;
  std::uint32_t sequence;
};
constexpr std::size_t header_bytes = sizeof(ping_id);

void fill(std::span<std::byte> ping, const ping_id& id) {
  std::memcpy(ping.data(), &id, header_bytes);
  for (std::size_t i = header_bytes; i < ping.size(); ++i) {
    ping[i] = static_cast<std::byte>((id.nonce + id.flow * 131 + id.sequence * 7 + i) % 251);
  }
}

enum class reply_kind { answer, late, stray };

// What a datagram received while waiting for ping `waiting` is.
reply_kind classify(std::span<const std::byte> got, const ping_id& waiting, std::vector<std::byte>& expected) {
  if (got.size() != expected.size()) {
    return reply_kind::stray;
  }
  ping_id id{};
  std::memcpy(&id, got.data(), header_bytes);
  if (id.nonce != waiting.nonce || id.flow != waiting.flow || id.sequence > waiting.sequence) {
    return reply_kind::stray;
  }
  fill(expected, id);
  if (!std::equal(got.begin(), got.end(), expected.begin())) {
    return reply_kind::stray;
  }
  return id.sequence == waiting.sequence ? reply_kind::answer : reply_kind::late;
}

corio::task<void> ping_flow(const settings& run, corio::net::endpoint server, ping_id id, flow_result& result) {
  auto socket = corio::net::udp_socket::bind(server.is_v6() ? corio::net::endpoint::any_v6(0)
                                                            : corio::net::endpoint::any_v4(0));
  socket.connect(server);
  std::vector<std::byte> ping(run.size);
  std::vector<std::byte> expected(run.size);
  std::vector<std::byte> reply(run.size + 1);  // one more: a longer datagram shows as longer, not cut to size
  const auto start = corio::clock::now();
  for (id.sequence = 0; id.sequence < run.count; ++id.sequence) {
    co_await corio::sleep_until(start + id.sequence * run.interval);
    fill(ping, id);
    const auto sent_at = corio::clock::now();
    std::error_code error;
    co_await socket.send(ping, error);
    ++result.sent;
    const auto deadline = sent_at + run.timeout;
    for (auto now = sent_at; !error && now < deadline; now = corio::clock::now()) {
      corio::net::datagram got = co_await corio::with_timeout(deadline - now, socket.recv(reply, error));
      if (error) {
        break;
      }
      reply_kind kind = classify(std::span(reply).first(got.size), id, expected);
      if (kind == reply_kind::answer) {
        std::chrono::duration<double, std::milli> rtt = corio::clock::now() - sent_at;
        result.rtt_ms.push_back(rtt.count());
        ++result.received;
        break;
      }
      ++(kind == reply_kind::late ? result.late : result.stray);
    }
    if (error == std::errc::connection_refused) {
      ++result.refused;  // nothing listens there: this ping is lost at once, the next one may fare better
    } else if (error && error != std::errc::timed_out) {
      throw std::system_error(error, "ping " + std::to_string(id.sequence) + " of flow " + std::to_string(id.flow));
    }
  }
}

corio::task<flow_result> ping_all(const settings& run) {
  std::vector<corio::net::endpoint> addresses = co_await corio::net::resolve(run.host, run.port);
  if (addresses.empty()) {
    throw std::runtime_error(run.host + ": no address");
  }
  std::vector<flow_result> results(run.flows);
  const std::uint64_t nonce = std::random_device{}() * 0x1'0000'0001ULL;
  corio::task_scope flows;
  for (unsigned flow = 0; flow < run.flows; ++flow) {
    flows.spawn(ping_flow(run, addresses.front(), ping_id{nonce, flow, 0}, results[flow]));
  }
  co_await flows.join();
  flow_result total;
  for (flow_result& each : results) {
    total.sent += each.sent;
    total.received += each.received;
    total.late += each.late;
    total.stray += each.stray;
    total.refused += each.refused;
    total.rtt_ms.insert(total.rtt_ms.end(), each.rtt_ms.begin(), each.rtt_ms.end());
  }
  co_return total;
}

// The value at fraction `at` of the sorted samples.
double quantile(const std::vector<double>& sorted, double at) {
  return sorted[std::min(sorted.size() - 1, static_cast<std::size_t>(at * static_cast<double>(sorted.size())))];
}

void print_summary(flow_result& total) {
  const std::uint64_t lost = total.sent - total.received;
  std::printf("udp_ping: %llu sent, %llu received, %llu lost (%.1f%%), %llu late, %llu stray, %llu refused; ",
              static_cast<unsigned long long>(total.sent), static_cast<unsigned long long>(total.received),
              static_cast<unsigned long long>(lost), total.sent == 0 ? 0.0 : 100.0 * lost / total.sent,
              static_cast<unsigned long long>(total.late), static_cast<unsigned long long>(total.stray),
              static_cast<unsigned long long>(total.refused));
  if (total.rtt_ms.empty()) {
    std::printf("rtt -\n");
    return;
  }
  std::sort(total.rtt_ms.begin(), total.rtt_ms.end());
  std::printf("rtt min/median/p99/max %.3f/%.3f/%.3f/%.3f ms\n", total.rtt_ms.front(), quantile(total.rtt_ms, 0.5),
              quantile(total.rtt_ms, 0.99), total.rtt_ms.back());
}

constexpr const char* usage_line =
    "usage: udp_ping --port N [--host NAME] [--count N] [--flows N] [--interval SECONDS] [--timeout SECONDS]\n"
    "                [--size N] [--threads N] [--backend auto|io_uring|epoll]\n";

}  // namespace

int main(int argc, char** argv) {
  settings run;
  const example::flags flags("udp_ping", usage_line);
  flags.parse(argc, argv, [&](std::string_view flag, std::string_view value) {
    if (run.take(flags, flag, value)) {
      return true;
    }
    if (flag == "--count") {
      run.count = flags.number<std::uint32_t>(flag, value, 1, 1'000'000'000);
    } else if (flag == "--flows") {
      run.flows = flags.number<unsigned>(flag, value, 1, 10'000);
    } else if (flag == "--interval") {
      run.interval = flags.seconds(flag, value, 0.0);
    } else if (flag == "--timeout") {
      run.timeout = flags.seconds(flag, value, 0.001);
    } else if (flag == "--size") {
      run.size = flags.number<std::size_t>(flag, value, header_bytes, 65507);
    } else {
      return false;
    }
    return true;
  });
  run.require_port(flags);

  corio::runtime rt(run.runtime.options());
  flow_result total;
  try {
    total = rt.block_on(ping_all(run));
  } catch (const std::exception& failure) {
    std::fprintf(stderr, "udp_ping: %s\n", failure.what());
    return 1;
  }
  print_summary(total);
  return total.received == total.sent ? 0 : 1;
}
