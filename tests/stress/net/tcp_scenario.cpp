// Drawing a TCP round's scenario (tcp_round.hpp). The odds favour short, busy rounds: most clients
// send a few small messages, some send up to 256 KiB at once, and about half the rounds disrupt
// something.
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "stress/net/tcp_round.hpp"

namespace corio::stress {
namespace {

constexpr std::size_t bytes_per_round = 6u << 20;
constexpr int largest_message = 256 << 10;

int maybe_deadline_us(random& choices, double probability) {
  return choices.chance(probability) ? choices.between(10, 500) : 0;
}

// A sleep an operation races in when_any: often shorter than a loopback round trip, so both orders of
// the two happen.
int maybe_race_us(random& choices, double probability) {
  return choices.chance(probability) ? choices.between(1, 300) : 0;
}

void append_message(client_plan& client, std::uint32_t index, std::uint32_t number, std::size_t length,
                    bool framed) {
  if (framed) {  // header: payload length, then the message's number and the client's index
    std::uint32_t header[2] = {static_cast<std::uint32_t>(length), number | (index << 16)};
    std::size_t at = client.stream.size();
    client.stream.resize(at + sizeof header);
    std::memcpy(client.stream.data() + at, header, sizeof header);
  }
  std::size_t at = client.stream.size();
  client.stream.resize(at + length);
  for (std::size_t i = at; i < at + length; ++i) {
    client.stream[i] = pattern_byte(index, i);
  }
  client.message_ends.push_back(client.stream.size());
}

disruption draw_disruption(random& choices, bool clients_in_scope) {
  switch (choices.below(4)) {
    case 0:
    case 1:
      if (choices.chance(0.5)) {
        return disruption::cancel_by_stop_token;
      }
      return clients_in_scope ? disruption::cancel_scope : disruption::cancel_by_handle;
    case 2:
      return choices.chance(0.5) ? disruption::close_from_task : disruption::close_from_thread;
    default:
      return disruption::shutdown_from_thread;
  }
}

client_plan draw_client(random& choices, std::uint32_t index, std::size_t budget, const tcp_scenario& plan,
                        double disruption_odds) {
  client_plan client;
  std::size_t target = choices.between(1, std::min(static_cast<int>(budget), choices.chance(0.3) ? 600000 : 40000));
  int messages = choices.between(1, 20);
  std::size_t total = 0;
  for (int number = 0; number < messages && total < target; ++number) {
    std::size_t length = choices.chance(0.1)   ? choices.between(1, largest_message)
                         : choices.chance(0.5) ? choices.between(1, 100)
                                               : choices.between(1, 8192);
    length = std::min(length, target - total + 1);
    append_message(client, index, static_cast<std::uint32_t>(number), length, plan.framed);
    total += length;
  }
  client.half_close = choices.chance(0.5);
  client.moved_between_writes = choices.chance(0.2);
  client.read_exact = !client.half_close && choices.chance(0.3);
  client.lockstep = !client.half_close && choices.chance(0.2);
  client.read_deadline_us = maybe_deadline_us(choices, 0.2);
  client.write_deadline_us = maybe_deadline_us(choices, 0.15);
  client.connect_deadline_us = maybe_deadline_us(choices, 0.15);
  client.read_race_us = maybe_race_us(choices, 0.2);
  client.connect_race_us = maybe_race_us(choices, 0.1);
  client.read_chunk = static_cast<std::size_t>(choices.chance(0.5) ? choices.between(1, 70000) : choices.between(1, 512));
  if (choices.chance(disruption_odds)) {
    client.disrupted = draw_disruption(choices, plan.clients_in_scope);
    client.disrupted_at_us = choices.between(0, choices.chance(0.5) ? 2000 : 50000);
  }
  return client;
}

}  // namespace

tcp_scenario draw_tcp_scenario(random& choices, bool destroy_mid_flight) {
  tcp_scenario plan;
  plan.server_on_loop = choices.chance(0.5);
  plan.server_workers = choices.between(1, 2);
  plan.separate_client_executor = choices.chance(0.4);
  plan.clients_on_loop = choices.chance(0.5);
  plan.client_workers = choices.between(1, 2);
  int clients = choices.chance(0.3) ? choices.between(10, 50) : choices.between(1, 10);
  plan.ipv6 = choices.chance(0.2);
  plan.framed = choices.chance(0.3);
  plan.nodelay = choices.chance(0.5);
  plan.server_read_deadline_us = maybe_deadline_us(choices, 0.3);
  plan.server_write_deadline_us = maybe_deadline_us(choices, 0.2);
  plan.accept_deadline_us = maybe_deadline_us(choices, 0.25);
  plan.server_read_race_us = maybe_race_us(choices, 0.2);
  plan.accept_race_us = maybe_race_us(choices, 0.2);
  plan.connections_in_scope = choices.chance(0.5);
  plan.accept_on_both = plan.separate_client_executor && choices.chance(0.3);
  plan.serve_elsewhere = plan.separate_client_executor && choices.chance(0.3);
  plan.server_buffer = static_cast<std::size_t>(choices.chance(0.5) ? choices.between(1, 64) * 1024 : choices.between(1, 4096));
  plan.clients_in_scope = choices.chance(0.3);
  double disruption_odds = choices.chance(0.5) ? 0.0 : choices.chance(0.5) ? 0.2 : 0.6;
  for (int index = 0; index < clients; ++index) {
    plan.clients.push_back(draw_client(choices, static_cast<std::uint32_t>(index),
                                       bytes_per_round / static_cast<std::size_t>(clients), plan, disruption_odds));
  }
  if (disruption_odds > 0 && choices.chance(0.3)) {
    for (int close = choices.between(1, 3); close > 0; --close) {
      plan.server_closes.push_back({choices.between(0, 30000),
                                    static_cast<std::size_t>(choices.below(static_cast<std::uint64_t>(clients)))});
    }
  }
  if (destroy_mid_flight) {
    plan.destroy_at_us = choices.between(0, 30000);
  }
  plan.destroy_server_first = choices.chance(0.5);
  plan.close_listener_in_task = choices.chance(0.3);
  return plan;
}

std::string describe(const tcp_scenario& plan) {
  auto clients_that = [&plan](auto predicate) {
    return static_cast<std::size_t>(std::count_if(plan.clients.begin(), plan.clients.end(), predicate));
  };
  std::size_t disrupted = clients_that([](const client_plan& each) { return each.disrupted != disruption::none; });
  std::size_t racing_reads = clients_that([](const client_plan& each) { return each.read_race_us > 0; });
  std::size_t racing_connects = clients_that([](const client_plan& each) { return each.connect_race_us > 0; });
  char text[768];
  std::snprintf(text, sizeof text,
                "tcp: server on %s/%d, clients on %s/%d, %zu clients (%zu disrupted), IPv6 %d, framed %d, server "
                "buffer %zu, deadlines read %d write %d accept %d us, races read %d accept %d us, clients racing "
                "reads %zu connects %zu, connections in scope %d, accepts on both %d, served elsewhere %d, clients "
                "in scope %d, server closes %zu, destroy at %lld us",
                plan.server_on_loop ? "loop" : "runtime", plan.server_workers,
                !plan.separate_client_executor ? "the same" : plan.clients_on_loop ? "loop" : "runtime",
                plan.client_workers, plan.clients.size(), disrupted, plan.ipv6, plan.framed, plan.server_buffer,
                plan.server_read_deadline_us, plan.server_write_deadline_us, plan.accept_deadline_us,
                plan.server_read_race_us, plan.accept_race_us, racing_reads, racing_connects,
                plan.connections_in_scope, plan.accept_on_both, plan.serve_elsewhere, plan.clients_in_scope,
                plan.server_closes.size(), static_cast<long long>(plan.destroy_at_us));
  return text;
}

}  // namespace corio::stress
