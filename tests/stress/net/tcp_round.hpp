#pragma once
// The stress test's TCP round (net_stress.hpp): an echo server and its clients, on one executor or two,
// disrupted at planned times. A scenario (tcp_scenario.cpp) is drawn first; the server
// (tcp_server.cpp) and the clients (tcp_clients.cpp) then share a tcp_round_state, which the test's
// thread (tcp_round.cpp) disrupts: it cancels, closes and shuts down sockets, closes the listener, or
// destroys the executors. With two executors, both may accept on the listener (on io_uring the one
// that is not the listener's home is refused, as documented) and a connection may be served by the
// executor that did not accept it. Reads, accepts and connects may race sleeps in when_any (a lost
// read must give its bytes back), and a lockstep client writes each message and reads its echo in
// one when_all.
//
// What is checked: a client nothing disrupted gets its whole stream back, byte for byte, and ends
// without an error; a disrupted one ends with a documented error only; a framed server sees each
// connection's frames from one client only, numbered from 0 without a gap (a connection that read
// another's bytes, or lost its first ones, breaks that); every accept and connection ends once the
// clients are done and the listener is closed.
//
// Threads: the state's atomics and mutex-guarded members are shared by the executors' threads and the
// test's thread; the plan is written before any task starts and only read after.
#include <corio/net/endpoint.hpp>
#include <corio/net/tcp_listener.hpp>
#include <corio/net/tcp_stream.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <vector>

#include "stress/net/net_stress.hpp"

namespace corio::stress {

enum class disruption {
  none,
  cancel_by_handle,      // join_handle::cancel() from a task
  cancel_by_stop_token,  // the client runs under with_stop_token; the test's thread requests the stop
  cancel_scope,          // the whole task_scope of clients is cancelled from a task
  close_from_task,       // the client's stream is closed under its operations by another task
  close_from_thread,     // ... by the test's thread
  shutdown_from_thread,  // its writing side is shut down by the test's thread
};

struct client_plan {
  std::vector<std::byte> stream;          // everything it sends; the echo must return exactly this
  std::vector<std::size_t> message_ends;  // each write_all ends at one
  bool half_close = false;                // shuts its writing side after the last message, reads to the end
  bool moved_between_writes = false;      // its stream moves (a growing vector) while its read is in flight
  bool read_exact = false;                // reads with read_exact (never with half_close), else read_some
  // Writes each message and reads its echo with read_exact in one when_all (never with half_close):
  // the two operands may run on two workers at once. No deadlines, races or moves then.
  bool lockstep = false;
  int read_deadline_us = 0;               // 0: no deadline
  int write_deadline_us = 0;
  int connect_deadline_us = 0;
  int read_race_us = 0;                   // > 0: each read races a sleep this long in when_any; 0: none
  int connect_race_us = 0;                // likewise its connects (one that loses closes its stream)
  std::size_t read_chunk = 4096;
  disruption disrupted = disruption::none;
  std::int64_t disrupted_at_us = -1;
};

struct tcp_scenario {
  bool server_on_loop = true;
  int server_workers = 1;
  bool separate_client_executor = false;
  bool clients_on_loop = true;
  int client_workers = 1;
  bool ipv6 = false;    // the listener is on ::1 (on 127.0.0.1 where ::1 cannot be bound)
  bool framed = false;  // the server reads a header and a payload with read_exact, else read_some
  bool nodelay = false;
  int server_read_deadline_us = 0;
  int server_write_deadline_us = 0;
  int accept_deadline_us = 0;
  int server_read_race_us = 0;  // > 0: the server's reads race a sleep this long in when_any
  int accept_race_us = 0;       // likewise its accepts
  bool connections_in_scope = false;  // the server's connection tasks: a task_scope, else detached
  // With a separate client executor: an accept loop runs on each executor (one listener, two
  // executors), and connections may be served on the executor that did not accept them.
  bool accept_on_both = false;
  bool serve_elsewhere = false;
  std::size_t server_buffer = 4096;
  bool clients_in_scope = false;  // the clients: a task_scope, else join handles
  struct server_close {
    std::int64_t at_us;
    std::size_t which;  // modulo the connections accepted by then
  };
  std::vector<server_close> server_closes;  // from the test's thread
  std::int64_t destroy_at_us = -1;          // the executors are destroyed then, -1: never
  bool destroy_server_first = false;
  bool close_listener_in_task = false;  // at the end; else from the test's thread
  std::vector<client_plan> clients;
};

/// `destroy_mid_flight`: the round ends by destroying its executors at a random time.
tcp_scenario draw_tcp_scenario(random& choices, bool destroy_mid_flight);
std::string describe(const tcp_scenario& plan);

/// A client's stream, in a vector that may grow (moving it) under its operations.
struct client_stream {
  std::mutex mutex;
  std::vector<corio::net::tcp_stream> slots;  // the stream is slots[0] until the client empties it
};

struct client_state {
  enum step : int { planned, connecting, connected, done, cancelled, failed };
  std::atomic<int> at{planned};
  std::atomic<std::uint64_t> sent{0};
  std::atomic<std::uint64_t> received{0};
  std::atomic<bool> disrupted{false};
  std::mutex mutex;
  std::shared_ptr<client_stream> stream;  // guarded by mutex; set once connected
  std::stop_source stop;
};

struct server_connection {
  std::mutex mutex;  // over stream.close(), which the test's thread may call too
  corio::net::tcp_stream stream;
  std::atomic<std::uint64_t> in{0};
  std::atomic<std::uint64_t> out{0};
};

struct tcp_round_state {
  tcp_round_state(tcp_scenario scenario, failure_log& failures);

  std::string progress() const;  // for the watchdog: what has not ended
  /// The stream a client connected, or null (not yet, or over).
  std::shared_ptr<client_stream> stream_of(std::size_t client);
  /// Closes client `client`'s stream (any thread), or shuts its writing side down.
  void close_client(std::size_t client, bool shutdown_only);
  bool anything_disrupted() const { return server_disrupted.load() || destroying.load(); }

  const tcp_scenario plan;
  failure_log& log;
  std::mutex listener_mutex;  // over listener.close()
  corio::net::tcp_listener listener;
  corio::net::endpoint at;
  std::chrono::steady_clock::time_point start;
  std::atomic<bool> listener_closing{false};
  std::atomic<bool> destroying{false};
  std::atomic<bool> server_disrupted{false};
  std::atomic<bool> clients_done{false};
  std::atomic<int> running{0};  // the round's top-level tasks not yet ended
  std::atomic<int> connections_open{0};
  std::vector<std::unique_ptr<client_state>> clients;
  mutable std::mutex connections_mutex;
  std::vector<std::shared_ptr<server_connection>> connections;
  std::unique_ptr<std::atomic<int>[]> client_of_port;  // a connected client's local port -> its index
};

/// An accept loop and its connections; decrements `running` when it ends. With `elsewhere` (the
/// other executor, when the plan says so), about half the connections are served there.
task<void> serve(tcp_round_state& round, executor_under_test* elsewhere);
/// Starts every client, makes the task-side disruptions, waits for the clients; then sets
/// clients_done and decrements `running`.
task<void> drive_clients(tcp_round_state& round);

}  // namespace corio::stress
