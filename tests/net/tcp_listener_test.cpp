// corio::net::tcp_listener typed over both backends: bind errors, and EMFILE on accept.
#include <corio/event_loop.hpp>
#include <corio/join_handle.hpp>
#include <corio/net/tcp_listener.hpp>
#include <corio/net/tcp_stream.hpp>
#include <corio/runtime.hpp>
#include <corio/time.hpp>
#include <corio/yield.hpp>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <chrono>
#include <filesystem>
#include <iterator>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "support/net.hpp"

using namespace std::chrono_literals;

namespace {

using corio::net::endpoint;
using corio::net::tcp_listener;
using corio::net::tcp_stream;
using namespace corio::test;

template <class Backend>
class listener : public backend_test<Backend> {};
TYPED_TEST_SUITE(listener, every_accept_path, backend_names);

// A second bind to a port in use fails: the error_code form stores EADDRINUSE, the throwing form names
// the operation. With SO_REUSEPORT on both, two listeners share the port.
TEST(tcp_listener_bind, a_port_in_use_is_refused_unless_both_listeners_ask_to_share_it) {
  auto first = tcp_listener::bind(endpoint::loopback_v4(0));
  const endpoint taken = first.local_endpoint();
  std::error_code error;
  auto second = tcp_listener::bind(taken, {}, error);
  EXPECT_EQ(error, std::error_code(EADDRINUSE, std::system_category())) << error.message();
  EXPECT_FALSE(second.is_open());
  try {
    tcp_listener::bind(taken);
    ADD_FAILURE() << "a second bind to a port in use succeeded";
  } catch (const std::system_error& e) {
    EXPECT_NE(std::string(e.what()).find("corio::net::tcp_listener::bind to " + taken.to_string()), std::string::npos)
        << e.what();
  }
  corio::net::listen_options shared;
  shared.reuse_port = true;
  auto a = tcp_listener::bind(endpoint::loopback_v4(0), shared);
  auto b = tcp_listener::bind(a.local_endpoint(), shared, error);
  EXPECT_FALSE(error) << error.message();
  EXPECT_EQ(b.local_endpoint(), a.local_endpoint());
}

// Accept hitting EMFILE reports it to that accept only; the accept loop goes on and serves again
// once descriptors free up.
TYPED_TEST(listener, accept_hitting_emfile_keeps_the_accept_loop_alive) {
  rlimit original{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &original), 0);
  run_on_loop(TestFixture::backend, [&]() -> corio::task<void> {
    // Warm-up: with every descriptor taken, UBSan cannot check a vptr it has not seen yet (its memory
    // probe needs a pipe), so park, reap and cancel once before (the reactor's and parker's types).
    // On its own listener: io_uring's accept takes RLIMIT_NOFILE when it is armed, and the multishot
    // accept stays armed across accepts, so the listener under test first accepts under the limit.
    auto warm_up = tcp_listener::bind(endpoint::loopback_v4(0));
    EXPECT_THROW(co_await corio::with_timeout(5ms, warm_up.accept()), corio::timed_out);
    auto listener = tcp_listener::bind(endpoint::loopback_v4(0));
    // Use up every descriptor under a lowered limit but one, which the client's socket takes: the
    // connection then waits in the kernel's accept queue and every accept of it fails with EMFILE
    // (io_uring's multishot accept, armed since the warm-up, meets EMFILE the moment it arrives).
    std::vector<int> hogs;
    rlimit tight = original;
    tight.rlim_cur = 64;
    EXPECT_EQ(::setrlimit(RLIMIT_NOFILE, &tight), 0);
    for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) {
      hogs.push_back(fd);
    }
    ::close(hogs.back());
    hogs.pop_back();
    auto client = co_await tcp_stream::connect(listener.local_endpoint());
    int emfile_seen = 0;
    tcp_stream accepted;
    for (int attempt = 0; attempt < 100 && !accepted.is_open(); ++attempt) {
      std::error_code error;
      accepted = co_await listener.accept(error);
      // By value and address: no error_category member call while descriptors are exhausted.
      if (error.value() == EMFILE && &error.category() == &std::system_category()) {
        ++emfile_seen;
        if (emfile_seen == 3) {  // the loop is alive; now let descriptors free up
          for (int fd : hogs) {
            ::close(fd);
          }
          hogs.clear();
          ::setrlimit(RLIMIT_NOFILE, &original);
        }
        // A yield, not a sleep: a sleep parks the loop, and the park's virtual call is one UBSan may
        // have to check again (its type cache is direct-mapped, and other checks since the warm-up
        // can evict the entry), which it cannot while descriptors are exhausted (seen in CI).
        co_await corio::yield();
      } else {
        EXPECT_FALSE(error) << error.message();
      }
    }
    EXPECT_GE(emfile_seen, 3);
    EXPECT_TRUE(accepted.is_open());
    if (!accepted.is_open()) {
      co_return;
    }
    co_await client.write_all(bytes("served"));
    std::string got(6, '\0');
    co_await accepted.read_exact(std::as_writable_bytes(std::span(got)));
    EXPECT_EQ(got, "served");
  });
  ::setrlimit(RLIMIT_NOFILE, &original);
}

// A limit raised after a listener's first accept counts at once. io_uring's multishot accept, armed
// under the old limit, keeps that one for its life (uring_source.cpp, "Accept"), so the first accept
// past the old limit ended EMFILE with the process far below the new one (a user trial).
TYPED_TEST(listener, accepts_past_a_limit_raised_after_the_first_accept_succeed) {
  rlimit original{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &original), 0);
  const auto open_now = static_cast<rlim_t>(std::distance(std::filesystem::directory_iterator("/proc/self/fd"),
                                                          std::filesystem::directory_iterator{}));
  constexpr int pairs = 24;  // 48 descriptors, past the lowered limit's room of 16
  ASSERT_GT(original.rlim_cur, open_now + 2 * pairs + 16) << "the test needs its descriptors under the usual limit";
  run_on_loop(TestFixture::backend, [&]() -> corio::task<void> {
    auto listener = tcp_listener::bind(endpoint::loopback_v4(0));
    rlimit lowered = original;
    lowered.rlim_cur = open_now + 16;  // room for the reactor's own descriptors and one connection
    EXPECT_EQ(::setrlimit(RLIMIT_NOFILE, &lowered), 0);
    {
      auto client = co_await tcp_stream::connect(listener.local_endpoint());
      auto accepted = co_await listener.accept();  // on io_uring this arms the multishot, under the lowered limit
    }
    EXPECT_EQ(::setrlimit(RLIMIT_NOFILE, &original), 0);
    std::vector<tcp_stream> kept;
    for (int i = 0; i < pairs; ++i) {
      kept.push_back(co_await tcp_stream::connect(listener.local_endpoint()));
      std::error_code error;
      kept.push_back(co_await corio::with_timeout(5s, listener.accept(error)));
      EXPECT_FALSE(error) << "accept " << i << " (about " << open_now + kept.size() << " descriptors open): "
                          << error.message();
    }
  });
  ::setrlimit(RLIMIT_NOFILE, &original);
}

}  // namespace

namespace {

// Several tasks accept on one listener at once (on io_uring they all park on its one multishot
// accept): every connection goes to exactly one of them, none is lost, and each is served.
corio::task<int> accept_and_echo_each(tcp_listener& listener, int connections) {
  for (int i = 0; i < connections; ++i) {
    co_await echo_connection(co_await listener.accept());
  }
  co_return connections;
}

corio::task<void> several_accepts_on_one_listener() {
  constexpr int acceptors = 4;
  constexpr int per_acceptor = 3;
  auto listener = tcp_listener::bind(endpoint::loopback_v4(0));
  std::vector<corio::join_handle<int>> accepting;
  for (int a = 0; a < acceptors; ++a) {
    accepting.push_back(corio::spawn(accept_and_echo_each(listener, per_acceptor)));
  }
  for (int i = 0; i < 3; ++i) {
    co_await corio::yield();  // every acceptor is parked before the first connection arrives
  }
  for (int c = 0; c < acceptors * per_acceptor; ++c) {
    std::string message = "connection " + std::to_string(c);
    EXPECT_EQ(co_await corio::with_timeout(5s, echo_once(listener.local_endpoint(), message)), message);
  }
  int accepted = 0;
  for (auto& each : accepting) {
    accepted += co_await corio::with_timeout(5s, std::move(each));
  }
  EXPECT_EQ(accepted, acceptors * per_acceptor);
}

TYPED_TEST(listener, several_tasks_accept_on_one_listener_at_once_on_a_loop) {
  run_on_loop(TestFixture::backend, [] { return several_accepts_on_one_listener(); });
}

TYPED_TEST(listener, several_tasks_accept_on_one_listener_at_once_on_two_workers) {
  corio::runtime rt(runtime_options(TestFixture::backend, 2));
  rt.block_on(several_accepts_on_one_listener());
}

// A listener closed on a plain thread while a runtime's task waits in its accept: the accept ends
// cancelled, and the port can be bound again once the listener's worker has taken its next turn
// (io_uring: its accept request holds the socket until that worker cancels it).
TYPED_TEST(listener, a_listener_closed_on_another_thread_ends_its_accept_and_frees_its_port) {
  corio::runtime rt(runtime_options(TestFixture::backend, 2));
  for (int round = 0; round < 10; ++round) {
    auto listener = tcp_listener::bind(endpoint::loopback_v4(0));
    const endpoint at = listener.local_endpoint();
    auto acceptor = rt.spawn(accept_once(listener));
    std::this_thread::sleep_for(10ms);  // the accept waits in a worker's reactor
    listener.close();
    std::error_code accepted =
        rt.block_on([&]() -> corio::task<std::error_code> { co_return co_await std::move(acceptor); });
    EXPECT_EQ(accepted, std::errc::operation_canceled) << "round " << round << ": " << accepted.message();
    std::error_code error;
    auto again = tcp_listener::bind(at, {}, error);
    for (int attempt = 0; error && attempt < 100; ++attempt) {
      std::this_thread::sleep_for(10ms);
      again = tcp_listener::bind(at, {}, error);
    }
    EXPECT_FALSE(error) << "round " << round << ": " << error.message();
  }
}

// A listener destroyed on a plain thread while two tasks wait in its accept: both accepts end
// cancelled and touch nothing of it when they resume (their connection stash is shared with them).
TYPED_TEST(listener, a_listener_destroyed_while_accepts_wait_ends_them_cancelled) {
  corio::runtime rt(runtime_options(TestFixture::backend, 2));
  for (int round = 0; round < 10; ++round) {
    std::optional<tcp_listener> listener(tcp_listener::bind(endpoint::loopback_v4(0)));
    auto first = rt.spawn(accept_once(*listener));
    auto second = rt.spawn(accept_once(*listener));
    std::this_thread::sleep_for(10ms);  // both accepts wait in the reactors
    listener.reset();
    for (auto* acceptor : {&first, &second}) {
      std::error_code accepted =
          rt.block_on([&]() -> corio::task<std::error_code> { co_return co_await std::move(*acceptor); });
      EXPECT_EQ(accepted, std::errc::operation_canceled) << "round " << round << ": " << accepted.message();
    }
  }
}

// In a child process: waits in an accept on `listener`, then closes it, on the accepting loop's thread
// or (`elsewhere`) on a plain thread while a runtime's worker waits in the accept; exits.
[[noreturn]] void accept_then_close_in_a_child(corio::io_backend backend, tcp_listener& listener, bool elsewhere) {
  if (elsewhere) {
    corio::runtime::options options = runtime_options(backend, 1);
    corio::runtime rt(options);
    auto acceptor = rt.spawn(accept_once(listener));
    std::this_thread::sleep_for(10ms);  // the accept waits (io_uring: its multishot is armed)
    listener.close();
    rt.block_on([&]() -> corio::task<void> { co_await std::move(acceptor); });
  } else {
    corio::event_loop loop(backend);
    loop.block_on([&]() -> corio::task<void> {
      auto acceptor = corio::spawn(accept_once(listener));
      co_await corio::sleep_for(5ms);
      listener.close();
      co_await std::move(acceptor);
    });
  }
  ::_exit(0);
}

// A child process that closes its copy of an inherited listener, with an accept waiting, leaves the
// listener to the parent: a pre-fork server's worker that exits must not stop its siblings' accepts.
// (On io_uring the close shut the socket down, to free its port at once on its own thread or to end
// its multishot accept from another, and that stopped it listening in every process: the parent's
// next client was refused.)
TYPED_TEST(listener, a_child_closing_its_copy_of_a_listener_leaves_the_parent_listening) {
  for (bool elsewhere : {false, true}) {
    auto listener = tcp_listener::bind(endpoint::loopback_v4(0));
    const endpoint at = listener.local_endpoint();
    pid_t child = ::fork();  // with no loop or runtime of this test's alive
    ASSERT_GE(child, 0);
    if (child == 0) {
      accept_then_close_in_a_child(TestFixture::backend, listener, elsewhere);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
    int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_EQ(::connect(client, at.data(), at.size()), 0) << (elsewhere ? "elsewhere: " : "") << std::strerror(errno);
    run_on_loop(TestFixture::backend, [&]() -> corio::task<void> {
      std::error_code error;
      co_await corio::with_timeout(2s, listener.accept(error));
      EXPECT_FALSE(error) << (elsewhere ? "elsewhere: " : "") << error.message();
    });
    ::close(client);
  }
}

}  // namespace
