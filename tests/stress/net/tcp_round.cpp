// The TCP round's test-thread side (tcp_round.hpp): starts the server and the clients, makes the
// disruptions planned for this thread at their times (closes and shutdowns of client streams, stop
// requests, closes of server connections, the executors' destruction), then closes the listener and
// checks that everything ended.
#include <corio/errors.hpp>

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <initializer_list>
#include <utility>

#include "stress/net/tcp_round.hpp"

namespace corio::stress {
namespace {

using corio::net::endpoint;
using corio::net::tcp_listener;
using std::chrono::microseconds;

constexpr auto everything_ends_within = std::chrono::seconds(30);

struct thread_disruption {
  enum kind { close_client, shutdown_client, stop_client, close_connection, destroy };
  std::int64_t at_us;
  kind what;
  std::size_t which;
};

std::vector<thread_disruption> thread_disruptions(const tcp_scenario& plan) {
  std::vector<thread_disruption> planned;
  for (std::size_t index = 0; index < plan.clients.size(); ++index) {
    const client_plan& client = plan.clients[index];
    switch (client.disrupted) {
      case disruption::close_from_thread:
        planned.push_back({client.disrupted_at_us, thread_disruption::close_client, index});
        break;
      case disruption::shutdown_from_thread:
        planned.push_back({client.disrupted_at_us, thread_disruption::shutdown_client, index});
        break;
      case disruption::cancel_by_stop_token:
        planned.push_back({client.disrupted_at_us, thread_disruption::stop_client, index});
        break;
      default:
        break;
    }
  }
  for (const auto& close : plan.server_closes) {
    planned.push_back({close.at_us, thread_disruption::close_connection, close.which});
  }
  if (plan.destroy_at_us >= 0) {
    planned.push_back({plan.destroy_at_us, thread_disruption::destroy, 0});
  }
  std::sort(planned.begin(), planned.end(), [](auto& a, auto& b) { return a.at_us < b.at_us; });
  return planned;
}

void close_a_connection(tcp_round_state& round, std::size_t which) {
  std::shared_ptr<server_connection> served;
  {
    std::lock_guard lock(round.connections_mutex);
    if (!round.connections.empty()) {
      served = round.connections[which % round.connections.size()];
    }
  }
  if (served) {
    round.server_disrupted = true;
    std::lock_guard lock(served->mutex);
    served->stream.close();
  }
}

void close_listener(tcp_round_state& round) {
  round.listener_closing = true;
  std::lock_guard lock(round.listener_mutex);
  round.listener.close();
}

task<void> close_listener_in_task(tcp_round_state& round) {
  close_listener(round);
  --round.running;
  co_return;
}

// Stops each executor, in the order given, before any is destroyed: an accept loop on one may spawn a
// connection's task on the other until that one has stopped.
void stop_in_order(std::initializer_list<executor_under_test*> executors) {
  for (executor_under_test* each : executors) {
    if (each != nullptr) {
      each->stop();
    }
  }
}

// The watchdog's view of the round ends with the round, however it ends.
struct state_described {
  state_described(failure_log& failures, const tcp_round_state& round) : log(failures) {
    log.describe_state([&round] { return round.progress(); });
  }
  ~state_described() { log.describe_state(nullptr); }
  failure_log& log;
};

}  // namespace

tcp_round_state::tcp_round_state(tcp_scenario scenario, failure_log& failures)
    : plan(std::move(scenario)), log(failures), client_of_port(new std::atomic<int>[65536]) {
  for (std::size_t port = 0; port < 65536; ++port) {
    client_of_port[port] = -1;
  }
  for (std::size_t index = 0; index < plan.clients.size(); ++index) {
    clients.push_back(std::make_unique<client_state>());
  }
}

std::string tcp_round_state::progress() const {
  char line[256];
  std::snprintf(line, sizeof line, "tasks running %d, connections open %d, listener closing %d, destroying %d\n",
                running.load(), connections_open.load(), listener_closing.load(), destroying.load());
  std::string text = line;
  for (std::size_t index = 0; index < clients.size(); ++index) {
    const client_state& state = *clients[index];
    if (state.at.load() == client_state::done) {
      continue;
    }
    std::snprintf(line, sizeof line, "client %zu: step %d, sent %llu, received %llu of %zu, disrupted %d\n", index,
                  state.at.load(), static_cast<unsigned long long>(state.sent.load()),
                  static_cast<unsigned long long>(state.received.load()), plan.clients[index].stream.size(),
                  state.disrupted.load());
    text += line;
  }
  std::lock_guard lock(connections_mutex);
  for (std::size_t index = 0; index < connections.size(); ++index) {
    std::snprintf(line, sizeof line, "connection %zu: in %llu, out %llu\n", index,
                  static_cast<unsigned long long>(connections[index]->in.load()),
                  static_cast<unsigned long long>(connections[index]->out.load()));
    text += line;
  }
  return text;
}

std::shared_ptr<client_stream> tcp_round_state::stream_of(std::size_t client) {
  std::lock_guard lock(clients[client]->mutex);
  return clients[client]->stream;
}

void tcp_round_state::close_client(std::size_t client, bool shutdown_only) {
  clients[client]->disrupted = true;
  std::shared_ptr<client_stream> stream = stream_of(client);
  if (!stream) {
    return;
  }
  std::lock_guard lock(stream->mutex);
  if (stream->slots.empty()) {
    return;
  }
  if (shutdown_only) {
    std::error_code ignored;
    stream->slots.front().shutdown(SHUT_WR, ignored);
  } else {
    stream->slots.front().close();
  }
}

void tcp_round(random& choices, io_backend backend, failure_log& log) {
  bool destroy_mid_flight = choices.chance(2.0 / 7.0);
  tcp_round_state round(draw_tcp_scenario(choices, destroy_mid_flight), log);
  const tcp_scenario& plan = round.plan;
  log.describe_scenario(describe(plan));
  state_described described(log, round);
  std::error_code no_ipv6;
  if (plan.ipv6) {
    round.listener = tcp_listener::bind(endpoint::loopback_v6(0), {}, no_ipv6);
  }
  if (!plan.ipv6 || no_ipv6) {
    round.listener = tcp_listener::bind(endpoint::loopback_v4(0));
  }
  round.at = round.listener.local_endpoint();

  auto server = std::make_unique<executor_under_test>(backend, plan.server_on_loop, plan.server_workers, log);
  std::unique_ptr<executor_under_test> separate;
  if (plan.separate_client_executor) {
    separate = std::make_unique<executor_under_test>(backend, plan.clients_on_loop, plan.client_workers, log);
  }
  round.start = std::chrono::steady_clock::now();
  round.running = plan.accept_on_both ? 3 : 2;
  server->spawn(serve(round, separate.get()));
  if (plan.accept_on_both) {
    separate->spawn(serve(round, server.get()));
  }
  (separate ? *separate : *server).spawn(drive_clients(round));

  for (const thread_disruption& each : thread_disruptions(plan)) {
    std::this_thread::sleep_until(round.start + microseconds(each.at_us));
    switch (each.what) {
      case thread_disruption::close_client:
      case thread_disruption::shutdown_client:
        round.close_client(each.which, each.what == thread_disruption::shutdown_client);
        break;
      case thread_disruption::stop_client:
        round.clients[each.which]->disrupted = true;
        round.clients[each.which]->stop.request_stop();
        break;
      case thread_disruption::close_connection:
        close_a_connection(round, each.which);
        break;
      case thread_disruption::destroy:
        round.destroying = true;
        stop_in_order({plan.destroy_server_first ? server.get() : separate.get(), separate.get(), server.get()});
        return;
    }
  }
  if (!wait_until([&] { return round.clients_done.load(); }, everything_ends_within)) {
    log.fail("the clients did not all end within 30 s");
  }
  if (plan.close_listener_in_task) {
    ++round.running;
    server->spawn(close_listener_in_task(round));
  } else {
    close_listener(round);
  }
  if (!wait_until([&] { return round.running.load() == 0; }, everything_ends_within)) {
    log.fail("%d tasks did not end within 30 s of the listener's close", round.running.load());
  }
  if (round.connections_open.load() != 0) {
    log.fail("%d server connections still open at the end", round.connections_open.load());
  }
  stop_in_order({separate.get(), server.get()});
}

void listener_round(random& choices, io_backend backend, failure_log& log) {
  tcp_scenario plan;
  plan.accept_deadline_us = choices.chance(0.5) ? choices.between(10, 500) : 0;
  bool on_loop = choices.chance(0.5);
  int workers = choices.between(1, 2);
  int accepts = choices.between(1, 3);
  int connections = choices.between(0, 5);
  auto close_after = microseconds(choices.between(0, 5000));
  log.describe_scenario("listener: on " + std::string(on_loop ? "loop" : "runtime") + "/" + std::to_string(workers) +
                        ", " + std::to_string(accepts) + " accept loops, accept deadline " +
                        std::to_string(plan.accept_deadline_us) + " us, " + std::to_string(connections) +
                        " connections, closed after " + std::to_string(close_after.count()) + " us");
  tcp_round_state round(std::move(plan), log);
  state_described described(log, round);
  round.listener = tcp_listener::bind(endpoint::loopback_v4(0));
  round.at = round.listener.local_endpoint();
  executor_under_test executor(backend, on_loop, workers, log);
  round.running = accepts;
  for (int each = 0; each < accepts; ++each) {
    executor.spawn(serve(round, nullptr));
  }
  for (int each = 0; each < connections; ++each) {  // connections closed at once, by a plain socket
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    (void)::connect(fd, round.at.data(), round.at.size());
    ::close(fd);
  }
  std::this_thread::sleep_for(close_after);
  close_listener(round);
  if (!wait_until([&] { return round.running.load() == 0; }, everything_ends_within)) {
    log.fail("%d accepts or connections did not end within 30 s of the listener's close", round.running.load());
  }
}

}  // namespace corio::stress
