// Multishot reads and accepts on a runtime of two workers (io_slot.hpp, "Multishot"): a socket's
// multishot state stays in the reactor of the worker that first used it (its home); a read or accept
// from a task running on the other worker is handed off to the home worker, which finishes it and
// resumes the task there.
// Typed over both backends: the outcomes must be the same on epoll (which has no multishot state and
// hands nothing off); on io_uring the tests also assert that the multishot and hand-off paths ran.
#include <corio/detail/io_slot.hpp>
#include <corio/join_handle.hpp>
#include <corio/net/tcp_listener.hpp>
#include <corio/net/tcp_stream.hpp>
#include <corio/runtime.hpp>
#include <corio/time.hpp>
#include <corio/yield.hpp>

#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "support/net.hpp"

using namespace std::chrono_literals;

namespace {

using corio::net::endpoint;
using corio::net::tcp_listener;
using corio::net::tcp_stream;
using namespace corio::test;

template <class Backend>
class multishot_workers : public backend_test<Backend> {};
TYPED_TEST_SUITE(multishot_workers, multishot_backends, backend_names);

corio::detail::io_slot& this_slot() { return *corio::detail::current_io_slot; }

// A worker's counters are readable only on its own thread: tasks report what they see, and the
// largest value per thread is that worker's count at its last report.
class per_worker_max {
 public:
  void report(std::uint64_t value) {
    std::lock_guard lock(mutex_);
    std::uint64_t& seen = seen_[std::this_thread::get_id()];
    seen = std::max(seen, value);
  }
  std::uint64_t sum() const {
    std::lock_guard lock(mutex_);
    std::uint64_t total = 0;
    for (const auto& [thread, value] : seen_) {
      total += value;
    }
    return total;
  }
  /// For a failure message: each reporting worker's count.
  std::string counts() const {
    std::lock_guard lock(mutex_);
    std::ostringstream text;
    for (const auto& [thread, value] : seen_) {
      text << ' ' << value;
    }
    return text.str();
  }
  std::size_t workers() const {
    std::lock_guard lock(mutex_);
    return seen_.size();
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::thread::id, std::uint64_t> seen_;
};

// Reads the home of `stream` (its first read, here), then holds this worker for `hold` without
// suspending, so that a read handed off to it meanwhile waits in its queue. `home` gets this thread.
corio::task<void> read_then_hold_worker(tcp_stream& stream, std::atomic<std::thread::id>& home,
                                        std::chrono::milliseconds hold) {
  std::byte first[1];
  EXPECT_EQ(co_await stream.read_some(first), 1u);
  home.store(std::this_thread::get_id());
  std::this_thread::sleep_for(hold);
}

// Yields until `home` is known; from then on the caller runs on the other worker (the home worker
// is held). Returns false if that did not happen within a bounded number of yields.
corio::task<bool> wait_for_home(const std::atomic<std::thread::id>& home) {
  for (int turn = 0; turn < 100000 && home.load() == std::thread::id(); ++turn) {
    co_await corio::yield();
  }
  co_return home.load() != std::thread::id() && home.load() != std::this_thread::get_id();
}

// A connected pair whose server stream is homed at a worker that a holder task keeps busy for a
// while; the caller continues on the other worker. Shared with the holder, which reads through it.
struct held_home {
  tcp_stream client;
  tcp_stream server;
  std::atomic<std::thread::id> home{};
  std::optional<corio::join_handle<void>> holder;
};

corio::task<std::shared_ptr<held_home>> hold_home(std::chrono::milliseconds hold) {
  auto held = std::make_shared<held_home>();
  std::tie(held->client, held->server) = co_await connected_pair();
  co_await held->client.write_all(bytes("1"));
  auto holder = [](std::shared_ptr<held_home> h, std::chrono::milliseconds ms) -> corio::task<void> {
    co_await read_then_hold_worker(h->server, h->home, ms);
  };
  held->holder.emplace(corio::spawn(holder(held, hold)));
  EXPECT_TRUE(co_await wait_for_home(held->home)) << "the holder never ran on the other worker";
  co_return held;
}

TYPED_TEST(multishot_workers, connections_on_two_workers_are_served_by_multishot_reads) {
  constexpr int connections = 16;
  constexpr int round_trips = 50;
  corio::runtime rt(runtime_options(TestFixture::backend, 2));
  per_worker_max multishot;
  int correct = rt.block_on([](per_worker_max& seen) -> corio::task<int> {
    auto client = [](tcp_stream stream, int id, per_worker_max& seen) -> corio::task<int> {
      int right = 0;
      for (int i = 0; i < round_trips; ++i) {
        std::string message = "c" + std::to_string(id) + "r" + std::to_string(i);
        right += co_await round_trip(stream, message) == message ? 1 : 0;
        seen.report(this_slot().multishot_completions());
        co_await corio::yield();  // let the other worker steal us now and then
      }
      co_return right;
    };
    std::vector<corio::join_handle<void>> servers;
    std::vector<corio::join_handle<int>> clients;
    for (int id = 0; id < connections; ++id) {
      auto [near, far] = co_await connected_pair();
      servers.push_back(corio::spawn(echo_connection(std::move(far))));
      clients.push_back(corio::spawn(client(std::move(near), id, seen)));
    }
    int right = 0;
    for (auto& each : clients) {
      right += co_await std::move(each);
    }
    for (auto& each : servers) {
      co_await std::move(each);
    }
    co_return right;
  }(multishot));
  EXPECT_EQ(correct, connections * round_trips);
  if (TestFixture::backend == corio::io_backend::io_uring) {
    EXPECT_GT(multishot.sum(), 0u) << "two workers ran every read single-shot";
  } else {
    EXPECT_EQ(multishot.sum(), 0u);
  }
}

// The read is handed off to the stream's home worker, which finishes it from the data its multishot
// recv queued and resumes the task there.
TYPED_TEST(multishot_workers, a_read_from_the_other_worker_is_handed_to_the_sockets_home) {
  corio::runtime rt(runtime_options(TestFixture::backend, 2));
  rt.block_on([backend = TestFixture::backend]() -> corio::task<void> {
    auto held = co_await hold_home(100ms);
    tcp_stream& client = held->client;
    tcp_stream& server = held->server;
    co_await client.write_all(bytes("hello"));
    std::string got(5, '\0');
    co_await server.read_exact(std::as_writable_bytes(std::span(got)));
    EXPECT_EQ(got, "hello");
    if (backend == corio::io_backend::io_uring && std::this_thread::get_id() == held->home.load()) {
      EXPECT_GT(this_slot().handed_off_here(), 0u) << "the home worker resumed us without a hand-off";
    }
    co_await std::move(*held->holder);
    for (int i = 0; i < 20; ++i) {  // later reads still work, wherever the task runs
      co_await client.write_all(bytes("x"));
      std::byte one[1];
      EXPECT_EQ(co_await server.read_some(one), 1u);
      co_await corio::yield();
    }
  }());
}

// A task cancelled while its handed-off read waits in the busy home worker's queue: the home worker
// finds the cancel when it takes the read, and the task sees corio::cancelled (no data ever comes).
TYPED_TEST(multishot_workers, cancelling_a_handed_off_read_before_the_home_takes_it) {
  corio::runtime rt(runtime_options(TestFixture::backend, 2));
  rt.block_on([]() -> corio::task<void> {
    auto held = co_await hold_home(200ms);
    auto reader = corio::spawn([](tcp_stream& stream) -> corio::task<void> {
      std::byte buffer[16];
      co_await stream.read_some(buffer);
      ADD_FAILURE() << "the read returned although nothing was sent";
    }(held->server));
    for (int i = 0; i < 10; ++i) {
      co_await corio::yield();  // the reader starts and hands its read off
    }
    reader.cancel();
    EXPECT_THROW(co_await corio::with_timeout(5s, std::move(reader)), corio::cancelled);
    co_await std::move(*held->holder);
  }());
}

// A stream destroyed while its read, handed to the busy home worker, waits in that worker's queue (a
// misuse: cancel first): the read ends operation_canceled when the home takes it, reading the
// socket's state through the op's own pin. Through the pointer into the stream, that was a
// use-after-free (ASan).
TYPED_TEST(multishot_workers, a_stream_destroyed_under_a_handed_off_read_ends_the_read_cancelled) {
  corio::runtime rt(runtime_options(TestFixture::backend, 2));
  rt.block_on([]() -> corio::task<void> {
    auto held = co_await hold_home(200ms);
    auto owned = std::make_unique<tcp_stream>(std::move(held->server));
    auto reader = corio::spawn(read_once(*owned));
    for (int i = 0; i < 10; ++i) {
      co_await corio::yield();  // the reader starts and hands its read off
    }
    owned.reset();
    std::error_code error = co_await corio::with_timeout(5s, std::move(reader));
    EXPECT_EQ(error, std::errc::operation_canceled) << error.message();
    co_await std::move(*held->holder);
  }());
}

// The same with a deadline: with_timeout's timer runs on the reader's worker, the read waits in the
// home worker's queue; the read ends with corio::timed_out once the home worker takes it.
TYPED_TEST(multishot_workers, a_deadline_passing_while_the_read_is_handed_off_times_it_out) {
  corio::runtime rt(runtime_options(TestFixture::backend, 2));
  rt.block_on([]() -> corio::task<void> {
    auto held = co_await hold_home(200ms);
    tcp_stream& client = held->client;
    tcp_stream& server = held->server;
    std::byte buffer[16];
    auto started = std::chrono::steady_clock::now();
    EXPECT_THROW(co_await corio::with_timeout(20ms, server.read_some(buffer)), corio::timed_out);
    EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
    co_await std::move(*held->holder);
    co_await client.write_all(bytes("after"));  // the stream still reads after a timed-out read
    std::string got(5, '\0');
    co_await server.read_exact(std::as_writable_bytes(std::span(got)));
    EXPECT_EQ(got, "after");
  }());
}

// Destroying the runtime while a handed-off read waits for the home worker: the read is cancelled or
// never taken, nothing leaks (LeakSanitizer) and nothing is freed under the kernel (ASan).
TYPED_TEST(multishot_workers, a_runtime_destroyed_with_a_handed_off_read_frees_everything) {
  std::atomic<bool> reader_started{false};
  {
    corio::runtime rt(runtime_options(TestFixture::backend, 2));
    rt.block_on([](std::atomic<bool>& started) -> corio::task<void> {
      auto held = co_await hold_home(100ms);
      held->holder->detach();
      corio::spawn([](std::shared_ptr<held_home> h, std::atomic<bool>& s) -> corio::task<void> {
        s.store(true);
        std::byte buffer[16];
        co_await h->server.read_some(buffer);
      }(held, started)).detach();
      for (int turn = 0; turn < 100000 && !started.load(); ++turn) {
        co_await corio::yield();
      }
      for (int turn = 0; turn < 10; ++turn) {
        co_await corio::yield();  // the reader hands its read off to the held home worker
      }
    }(reader_started));
  }  // ~runtime: the holder still holds the home worker; the read is queued there or in flight
  EXPECT_TRUE(reader_started.load());
}

// A stream whose last read ended its multishot (EOF), let go of on the worker that is not its home:
// the home releases its state (and the registered file that holds the socket open) at its next turn,
// not when the runtime ends.
TYPED_TEST(multishot_workers, a_stream_closed_on_another_worker_is_released_by_its_home_at_once) {
  corio::runtime rt(runtime_options(TestFixture::backend, 2));
  rt.block_on([backend = TestFixture::backend]() -> corio::task<void> {
    auto held = co_await hold_home(100ms);  // the server stream is homed at the held worker; we are on the other
    held->client.close();
    std::this_thread::sleep_for(250ms);  // this worker blocked: the home finishes its hold and takes the EOF
    held->server.close();                // let go of here, off its home
    struct seen {
      std::atomic<std::size_t> files{0};
      std::atomic<bool> on_home{false};
    };
    auto probe_seen = std::make_shared<seen>();
    auto probe = corio::spawn([](std::shared_ptr<seen> out, std::shared_ptr<held_home> h) -> corio::task<void> {
      out->files.store(this_slot().registered_files());
      out->on_home.store(std::this_thread::get_id() == h->home.load());
      co_return;
    }(probe_seen, held));
    std::this_thread::sleep_for(100ms);  // blocked again: only the home worker can run the probe
    co_await corio::with_timeout(5s, std::move(probe));
    co_await std::move(*held->holder);
    if (backend == corio::io_backend::io_uring) {
      EXPECT_TRUE(probe_seen->on_home.load()) << "the probe did not run on the stream's home worker";
      EXPECT_EQ(probe_seen->files.load(), 0u) << "the home still holds the released stream's registered file";
    }
  }());
}

// Blocking connects from a plain thread (no corio reads on the runtime under test, so its multishot
// counters count accepts only); the sockets stay open until the object goes.
class plain_clients {
 public:
  plain_clients(std::uint16_t port, int count) : thread_([this, port, count] {
    for (int i = 0; i < count; ++i) {
      int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in address{};
      address.sin_family = AF_INET;
      address.sin_port = htons(port);
      address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0) << std::strerror(errno);
      fds_.push_back(fd);
    }
  }) {}
  ~plain_clients() {
    thread_.join();
    for (int fd : fds_) {
      ::close(fd);
    }
  }

 private:
  std::vector<int> fds_;
  std::thread thread_;
};

constexpr int accepts_per_task = 8;

// Tasks on both workers accept on one listener at once from the start (so both race to create its
// multishot state): every connection goes to exactly one of them, and on io_uring the listener's one
// multishot accept serves them.
TYPED_TEST(multishot_workers, acceptors_on_two_workers_share_one_multishot_accept) {
  constexpr int acceptors = 4;
  corio::runtime rt(runtime_options(TestFixture::backend, 2));
  per_worker_max multishot;
  auto listener = tcp_listener::bind(endpoint::loopback_v4(0));
  int accepted = rt.block_on([](tcp_listener& from, per_worker_max& seen) -> corio::task<int> {
    auto acceptor = [](tcp_listener& on, per_worker_max& seen) -> corio::task<int> {
      std::vector<tcp_stream> streams;
      for (int i = 0; i < accepts_per_task; ++i) {
        streams.push_back(co_await on.accept());
        seen.report(this_slot().multishot_completions());
        co_await corio::yield();  // let the other worker steal us now and then
      }
      // The listener's home counts its multishot completions: report from both workers, whichever
      // ran the accepts' tasks last (on a loaded machine the other worker may take a while to steal).
      auto until = std::chrono::steady_clock::now() + 5s;
      while (seen.workers() < 2 && std::chrono::steady_clock::now() < until) {
        seen.report(this_slot().multishot_completions());
        co_await corio::yield();
      }
      co_return static_cast<int>(std::count_if(streams.begin(), streams.end(), [](auto& s) { return s.is_open(); }));
    };
    std::vector<corio::join_handle<int>> accepting;
    for (int a = 0; a < acceptors; ++a) {
      accepting.push_back(corio::spawn(acceptor(from, seen)));
    }
    plain_clients clients(from.local_endpoint().port(), acceptors * accepts_per_task);
    int total = 0;
    for (auto& each : accepting) {
      total += co_await corio::with_timeout(5s, std::move(each));
    }
    co_return total;
  }(listener, multishot));
  EXPECT_EQ(accepted, acceptors * accepts_per_task);
  if (TestFixture::backend == corio::io_backend::io_uring) {
    EXPECT_GT(multishot.sum(), 0u) << "two workers ran every accept single-shot; counts:" << multishot.counts();
  } else {
    EXPECT_EQ(multishot.sum(), 0u);
  }
}

// The first accept homes the listener's multishot state at its worker, which a holder then keeps
// busy; an accept from the other worker is handed off there, so (io_uring) it finishes only once the
// hold is over; the stream it yields works.
TYPED_TEST(multishot_workers, an_accept_from_the_other_worker_is_handed_to_the_listeners_home) {
  struct shared {
    tcp_listener listener = tcp_listener::bind(endpoint::loopback_v4(0));
    std::atomic<std::thread::id> home{};
    std::atomic<bool> hold_over{false};
  };
  corio::runtime rt(runtime_options(TestFixture::backend, 2));
  rt.block_on([backend = TestFixture::backend]() -> corio::task<void> {
    auto state = std::make_shared<shared>();
    tcp_stream first_client = co_await tcp_stream::connect(state->listener.local_endpoint());
    auto holder = corio::spawn([](std::shared_ptr<shared> on) -> corio::task<tcp_stream> {
      tcp_stream first = co_await on->listener.accept();
      on->home.store(std::this_thread::get_id());
      std::this_thread::sleep_for(100ms);
      on->hold_over.store(true);
      co_return first;
    }(state));
    EXPECT_TRUE(co_await wait_for_home(state->home)) << "the holder never ran on the other worker";
    tcp_stream client = co_await tcp_stream::connect(state->listener.local_endpoint());
    tcp_stream accepted = co_await corio::with_timeout(5s, state->listener.accept());
    if (backend == corio::io_backend::io_uring) {
      EXPECT_TRUE(state->hold_over.load()) << "the accept did not wait for the listener's home";
    }
    tcp_stream first = co_await std::move(holder);
    EXPECT_TRUE(first.is_open());
    auto server = corio::spawn(echo_connection(std::move(accepted)));
    EXPECT_EQ(co_await round_trip(client, "handed off"), "handed off");
    client.close();
    co_await corio::with_timeout(5s, std::move(server));
  }());
}

// Accept loops on both workers, each accept under a deadline of tens of microseconds, while
// connections keep arriving: an accept handed to the listener's home can finish there at once (a
// connection already queued) just as its deadline's timer, on the handing worker, cancels it. The home
// delivered such an op twice (a plain store over the cancel request, which was delivered again), so a
// task resumed in its next await or after its frame was gone (a user trial: the abort "an I/O
// operation's frame was destroyed while the kernel still owned it", or a use after free).
std::uint64_t scrambled(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  return x ^ (x >> 31);
}

corio::task<void> accept_under_deadlines(tcp_listener& listener, int id, std::atomic<int>& accepted, int wanted) {
  for (int i = 0; accepted.load() < wanted; ++i) {
    std::error_code error;
    auto deadline = std::chrono::microseconds(10 + scrambled(static_cast<std::uint64_t>(id) * 100000 + i) % 200);
    tcp_stream stream = co_await corio::with_timeout(deadline, listener.accept(error));
    if (!error) {
      accepted.fetch_add(1);
    }
    if (i % 3 == 0) {
      co_await corio::yield();  // lets the other worker steal the task now and then
    }
  }
}

corio::task<void> connect_many(endpoint to, int count) {
  for (int i = 0; i < count; ++i) {
    tcp_stream client = co_await tcp_stream::connect(to);
    if (i % 4 == 0) {
      co_await corio::sleep_for(std::chrono::microseconds(scrambled(i) % 100));
    }
  }
}

TYPED_TEST(multishot_workers, accepts_under_short_deadlines_on_both_workers_resume_each_task_once) {
  corio::runtime rt(runtime_options(TestFixture::backend, 2));
  constexpr int wanted = 1500;
  std::atomic<int> accepted{0};
  rt.block_on([](std::atomic<int>& accepted) -> corio::task<void> {
    auto listener = tcp_listener::bind(endpoint::loopback_v4(0));
    std::vector<corio::join_handle<void>> acceptors;
    for (int id = 0; id < 4; ++id) {
      acceptors.push_back(corio::spawn(accept_under_deadlines(listener, id, accepted, wanted)));
    }
    co_await corio::spawn(connect_many(listener.local_endpoint(), wanted));
    co_await corio::sleep_for(200ms);
    accepted.store(wanted);  // stop the acceptors even if a connection was reset before its accept
    for (auto& each : acceptors) {
      co_await std::move(each);
    }
  }(accepted));
  EXPECT_EQ(accepted.load(), wanted);
}

// The same race on reads (a stream's multishot read, served at its home), with content checked: 16
// streams, a writer and a reader under deadlines of tens of microseconds each, spread over both workers.
constexpr std::size_t bytes_per_stream = 2 * 1024 * 1024;

std::byte pattern_at(std::size_t offset) { return static_cast<std::byte>(offset * 7); }

corio::task<void> write_pattern(std::shared_ptr<tcp_stream> stream) {
  std::vector<std::byte> chunk(5000);
  for (std::size_t offset = 0; offset < bytes_per_stream;) {
    std::size_t size = std::min<std::size_t>(bytes_per_stream - offset, 1 + scrambled(offset) % chunk.size());
    for (std::size_t i = 0; i < size; ++i) {
      chunk[i] = pattern_at(offset + i);
    }
    co_await stream->write_all(std::span(chunk).first(size));
    offset += size;
    if (scrambled(offset) % 5 == 0) {
      co_await corio::yield();
    }
  }
}

corio::task<bool> read_pattern_under_deadlines(std::shared_ptr<tcp_stream> stream) {
  std::vector<std::byte> buffer(3000);
  for (std::size_t offset = 0, i = 0; offset < bytes_per_stream; ++i) {
    std::error_code error;
    auto deadline = std::chrono::microseconds(20 + scrambled(i) % 400);
    std::size_t size = co_await corio::with_timeout(deadline, stream->read_some(buffer, error));
    if (error == std::errc::timed_out) {
      continue;
    }
    if (error || size == 0) {
      co_return false;
    }
    for (std::size_t k = 0; k < size; ++k) {
      if (buffer[k] != pattern_at(offset + k)) {
        co_return false;
      }
    }
    offset += size;
  }
  co_return true;
}

TYPED_TEST(multishot_workers, reads_under_short_deadlines_on_both_workers_resume_each_task_once_and_lose_nothing) {
  corio::runtime rt(runtime_options(TestFixture::backend, 2));
  bool intact = rt.block_on([]() -> corio::task<bool> {
    auto listener = tcp_listener::bind(endpoint::loopback_v4(0));
    std::vector<corio::join_handle<void>> writers;
    std::vector<corio::join_handle<bool>> readers;
    for (int i = 0; i < 16; ++i) {
      auto client = std::make_shared<tcp_stream>(co_await tcp_stream::connect(listener.local_endpoint()));
      auto server = std::make_shared<tcp_stream>(co_await listener.accept());
      writers.push_back(corio::spawn(write_pattern(client)));
      readers.push_back(corio::spawn(read_pattern_under_deadlines(server)));
    }
    for (auto& each : writers) {
      co_await std::move(each);
    }
    bool all = true;
    for (auto& each : readers) {
      all = co_await std::move(each) && all;
    }
    co_return all;
  }());
  EXPECT_TRUE(intact);
}

}  // namespace
