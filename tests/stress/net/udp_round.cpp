// The stress test's UDP round (net_stress.hpp): one sender floods 1-4 receivers with numbered
// datagrams, some sends under deadlines, perhaps cancelled midway; each receiver waits plainly,
// under a deadline, or in a when_any against a sleep. Loopback may drop datagrams but never reorders,
// cuts or corrupts them, so each receiver checks the header, the payload and that the numbers rise.
// The round ends with the receivers' sockets closed from the test's thread under their waiting
// receives (each must end), or with the executor destroyed under them.
#include <corio/errors.hpp>
#include <corio/join_handle.hpp>
#include <corio/net/udp_socket.hpp>
#include <corio/time.hpp>

#include <atomic>
#include <cstring>
#include <span>
#include <utility>
#include <variant>
#include <vector>

#include "stress/net/net_stress.hpp"

namespace corio::stress {
namespace {

using corio::net::endpoint;
using corio::net::udp_socket;
using std::chrono::microseconds;

constexpr int expiries_allowed = 100000;
constexpr auto receivers_end_within = std::chrono::seconds(15);

enum class receive_style { plain, deadline, raced_with_sleep };

struct header {
  std::uint32_t receiver;
  std::uint32_t number;
  std::uint32_t size;
};

struct udp_round_state {
  explicit udp_round_state(failure_log& failures) : log(failures) {}
  failure_log& log;
  std::vector<udp_socket> receivers;
  std::vector<endpoint> addresses;
  std::vector<receive_style> styles;
  std::vector<std::int64_t> last_number;  // each receiver's own
  udp_socket sender;
  int deadline_us = 50;
  std::atomic<bool> done{false};
  std::atomic<int> running{0};
  std::atomic<int> sent{0};
};

std::uint32_t payload_stream(const header& head) { return head.receiver * 1000003 + head.number; }

void make_datagram(std::vector<std::byte>& datagram, std::uint32_t receiver, std::uint32_t number, std::size_t size) {
  datagram.resize(size);
  header head{receiver, number, static_cast<std::uint32_t>(size)};
  std::memcpy(datagram.data(), &head, sizeof head);
  for (std::size_t i = sizeof head; i < size; ++i) {
    datagram[i] = pattern_byte(payload_stream(head), i);
  }
}

void check_datagram(udp_round_state& round, std::size_t receiver, std::span<const std::byte> datagram,
                    bool truncated) {
  header head{};
  if (truncated || datagram.size() < sizeof head) {
    round.log.fail("udp: receiver %zu got %zu bytes, truncated %d", receiver, datagram.size(), truncated);
    return;
  }
  std::memcpy(&head, datagram.data(), sizeof head);
  if (head.receiver != receiver || head.size != datagram.size()) {
    round.log.fail("udp: receiver %zu got a datagram of %zu bytes whose header says receiver %u, %u bytes", receiver,
                   datagram.size(), head.receiver, head.size);
    return;
  }
  if (static_cast<std::int64_t>(head.number) <= round.last_number[receiver]) {
    round.log.fail("udp: receiver %zu got datagram %u after %lld", receiver, head.number,
                   static_cast<long long>(round.last_number[receiver]));
  }
  round.last_number[receiver] = head.number;
  for (std::size_t i = sizeof head; i < datagram.size(); ++i) {
    if (datagram[i] != pattern_byte(payload_stream(head), i)) {
      round.log.fail("udp: receiver %zu: datagram %u differs at byte %zu", receiver, head.number, i);
      return;
    }
  }
}

task<void> receive(udp_round_state& round, std::size_t index) {
  std::vector<std::byte> buffer(9000);
  udp_socket& socket = round.receivers[index];
  int expiries = 0;
  while (!round.done.load()) {
    std::error_code error;
    corio::net::datagram got;
    receive_style style = expiries < expiries_allowed ? round.styles[index] : receive_style::plain;
    auto receiving = socket.recv_from(buffer, error);
    got = co_await within_limits<corio::net::datagram>(style == receive_style::deadline ? round.deadline_us : 0,
                                                       style == receive_style::raced_with_sleep ? round.deadline_us : 0,
                                                       std::move(receiving), error);
    if (error == std::errc::timed_out) {
      ++expiries;
      continue;
    }
    if (error) {
      if (error != std::errc::operation_canceled && error != std::errc::bad_file_descriptor) {
        round.log.fail("udp: receiver %zu ended with %s", index, describe(error).c_str());
      }
      co_return;
    }
    check_datagram(round, index, std::span(buffer.data(), got.size), got.truncated);
  }
}

task<void> send(udp_round_state& round, std::uint64_t seed, int count) {
  random choices(seed);
  std::vector<std::byte> datagram;
  std::vector<std::uint32_t> numbers(round.receivers.size(), 0);
  for (int each = 0; each < count; ++each) {
    auto to = static_cast<std::size_t>(choices.below(round.receivers.size()));
    make_datagram(datagram, static_cast<std::uint32_t>(to), numbers[to]++,
                  static_cast<std::size_t>(choices.between(12, choices.chance(0.1) ? 8000 : 600)));
    std::error_code error;
    auto sending = round.sender.send_to(datagram, round.addresses[to], error);
    co_await within_deadline<std::size_t>(choices.chance(0.3) ? choices.between(10, 500) : 0, std::move(sending),
                                          error);
    if (error == std::errc::operation_canceled) {
      co_return;
    }
    if (error && error != std::errc::timed_out && error != std::errc::no_buffer_space &&
        error != std::errc::connection_refused) {
      round.log.fail("udp: a send ended with %s", describe(error).c_str());
    }
    ++round.sent;
    if (choices.chance(0.05)) {
      co_await corio::sleep_for(microseconds(50));
    }
  }
}

template <class Body>
task<void> counted(udp_round_state& round, const char* what, Body body) {
  try {
    co_await body();
  } catch (const corio::cancelled&) {
  } catch (const std::exception& error) {
    round.log.fail("udp: the %s threw %s", what, error.what());
  }
  --round.running;
}

task<void> send_then_maybe_cancel(udp_round_state& round, std::uint64_t seed, int count, std::int64_t cancel_at_us) {
  auto sender = corio::spawn(counted(round, "sender", [&round, seed, count] { return send(round, seed, count); }));
  if (cancel_at_us >= 0) {
    co_await corio::sleep_for(microseconds(cancel_at_us));
    sender.cancel();
  }
  co_await std::move(sender);
}

}  // namespace

void udp_round(random& choices, io_backend backend, failure_log& log) {
  udp_round_state round(log);
  bool on_loop = choices.chance(0.5);
  int workers = choices.between(1, 2);
  int receivers = choices.between(1, 4);
  round.deadline_us = choices.between(10, 500);
  for (int index = 0; index < receivers; ++index) {
    round.receivers.push_back(udp_socket::bind(endpoint::loopback_v4(0)));
    round.addresses.push_back(round.receivers.back().local_endpoint());
    round.styles.push_back(static_cast<receive_style>(choices.below(3)));
    round.last_number.push_back(-1);
  }
  round.sender = udp_socket::bind(endpoint::loopback_v4(0));
  int count = choices.between(100, 3000);
  std::int64_t cancel_sender_at_us = choices.chance(0.4) ? choices.between(0, 20000) : -1;
  bool destroy_under_receives = choices.below(3) == 0;
  auto end_after = std::chrono::milliseconds(choices.between(0, 20));
  std::uint64_t sender_seed = choices.next();
  std::string styles;
  for (receive_style style : round.styles) {
    styles += style == receive_style::plain ? " plain" : style == receive_style::deadline ? " deadline" : " raced";
  }
  log.describe_scenario("udp: on " + std::string(on_loop ? "loop" : "runtime") + "/" + std::to_string(workers) +
                        ", receivers" + styles + ", " + std::to_string(round.deadline_us) + " us, " +
                        std::to_string(count) + " datagrams, sender cancelled at " +
                        std::to_string(cancel_sender_at_us) + " us, destroyed under receives " +
                        std::to_string(destroy_under_receives));

  executor_under_test executor(backend, on_loop, workers, log);
  round.running = receivers + 1;
  for (int index = 0; index < receivers; ++index) {
    executor.spawn(counted(round, "receiver",
                           [&round, index] { return receive(round, static_cast<std::size_t>(index)); }));
  }
  executor.spawn(send_then_maybe_cancel(round, sender_seed, count, cancel_sender_at_us));
  wait_until([&] { return round.sent.load() >= count || round.running.load() <= receivers; }, receivers_end_within);
  std::this_thread::sleep_for(end_after);
  if (destroy_under_receives) {
    executor.stop();
    return;
  }
  round.done = true;
  for (udp_socket& receiver : round.receivers) {
    receiver.close();  // from this thread, under the receive that waits
  }
  if (!wait_until([&] { return round.running.load() == 0; }, receivers_end_within)) {
    log.fail("udp: %d tasks did not end within 15 s of their sockets' close", round.running.load());
  }
}

}  // namespace corio::stress
