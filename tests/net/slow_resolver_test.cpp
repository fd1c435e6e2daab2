// resolve() cancelled while its getaddrinfo still runs on the blocking pool: the call goes on,
// detached, after the resolve frame is gone, so it must not read the host name from that frame (a
// user trial: the lookup read freed memory, or a name the frame's next user wrote there). A slow DNS
// server is played by this binary's own getaddrinfo, which waits, then reads the name and records
// it, as glibc reads it again for each query it sends; it forwards to the real one. Its own binary,
// so no other test sees the interposer. ASan catches the read of a freed (or pooled, poisoned)
// frame; without it, the recorded name shows whether the call still had the host it was given.
#include <corio/errors.hpp>
#include <corio/net/resolve.hpp>
#include <corio/net/tcp_stream.hpp>
#include <corio/runtime.hpp>
#include <corio/time.hpp>

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <netdb.h>

#include <chrono>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

namespace {

std::mutex names_mutex;
std::vector<std::string> names_looked_up;  // names_mutex

std::vector<std::string> take_names() {
  std::lock_guard lock(names_mutex);
  return std::exchange(names_looked_up, {});
}

}  // namespace

extern "C" int getaddrinfo(const char* node, const char* service, const addrinfo* hints, addrinfo** found) {
  using real_getaddrinfo = int (*)(const char*, const char*, const addrinfo*, addrinfo**);
  static auto real = reinterpret_cast<real_getaddrinfo>(::dlsym(RTLD_NEXT, "getaddrinfo"));
  std::this_thread::sleep_for(200ms);
  std::string name(node != nullptr ? node : "");
  {
    std::lock_guard lock(names_mutex);
    names_looked_up.push_back(name);
  }
  return real(name.c_str(), service, hints, found);
}

namespace {

TEST(slow_resolver, a_lookup_that_timed_out_still_looks_up_the_name_it_was_given) {
  take_names();
  {
    corio::runtime rt(corio::runtime::options{.workers = 2});
    rt.block_on([]() -> corio::task<void> {
      EXPECT_THROW((void)co_await corio::with_timeout(20ms, corio::net::resolve("localhost", 80)), corio::timed_out);
      std::vector<std::string> filler(64, std::string(40, 'x'));  // frames and strings where the lookup's were
      co_await corio::sleep_for(300ms);  // the lookup goes on, detached, meanwhile
    }());
  }  // the runtime's shutdown waits for the blocking call
  EXPECT_EQ(take_names(), std::vector<std::string>{"localhost"});
}

TEST(slow_resolver, a_connect_by_name_cancelled_during_its_lookup_leaves_the_lookup_its_name) {
  take_names();
  {
    corio::runtime rt(corio::runtime::options{.workers = 2});
    rt.block_on([]() -> corio::task<void> {
      auto connecting = corio::spawn(corio::net::tcp_stream::connect("localhost", 9));
      co_await corio::sleep_for(20ms);
      connecting.cancel();
      EXPECT_THROW((void)co_await std::move(connecting), corio::cancelled);
      co_await corio::sleep_for(300ms);
    }());
  }
  EXPECT_EQ(take_names(), std::vector<std::string>{"localhost"});
}

// The error_code form of connect by name reports a lookup that timed out or was cancelled as it
// reports a connect that was (timed_out, operation_canceled) instead of throwing: it threw
// corio::timed_out or corio::cancelled past the error_code before the fix.
TEST(slow_resolver, a_connect_by_name_stores_a_lookup_s_timeout_or_cancellation_in_its_error_code) {
  take_names();
  {
    corio::runtime rt(corio::runtime::options{.workers = 2});
    rt.block_on([]() -> corio::task<void> {
      std::error_code timed;
      auto stream = co_await corio::with_timeout(20ms, corio::net::tcp_stream::connect("localhost", 9, timed));
      EXPECT_EQ(timed, std::errc::timed_out) << timed.message();
      EXPECT_FALSE(stream.is_open());
      std::error_code stopped;
      auto connecting = corio::spawn([&stopped]() -> corio::task<bool> {
        auto s = co_await corio::net::tcp_stream::connect("localhost", 9, stopped);
        co_return s.is_open();
      });
      co_await corio::sleep_for(20ms);
      connecting.cancel();
      EXPECT_FALSE(co_await std::move(connecting));
      EXPECT_EQ(stopped, std::errc::operation_canceled) << stopped.message();
      co_await corio::sleep_for(300ms);
    }());
  }
  EXPECT_EQ(take_names(), (std::vector<std::string>{"localhost", "localhost"}));
}

}  // namespace
