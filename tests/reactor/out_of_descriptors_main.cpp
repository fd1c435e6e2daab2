// A process whose first I/O comes while it is out of descriptors (a server's worker meeting its
// first connection in an EMFILE storm): its reactor cannot be created then, because a ring or an
// epoll instance and an eventfd each need a descriptor. Checks that
//   1. the error_code form of the operation stores EMFILE, and the throwing form throws
//      std::system_error naming the operation (neither throws from the other's path);
//   2. once descriptors free up, the next operation creates the reactor and works;
//   3. the automatic backend choice was not made for good while out of descriptors: it is what the
//      machine offers (io_uring where a ring can be set up), not epoll;
//   4. the same holds on a runtime that names epoll;
//   5. on a runtime of two workers where one has a reactor, an op on the other (which cannot make
//      one) is served by the first: it succeeds instead of failing with EMFILE.
// Its own process, because the automatic choice is made once per process. Exit 0: all held.
#include <corio/io_backend.hpp>
#include <corio/net/tcp_stream.hpp>
#include <corio/runtime.hpp>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "support/net.hpp"

namespace {

int failures = 0;

void expect(bool condition, const std::string& what) {
  std::printf("%s: %s\n", condition ? "ok  " : "FAIL", what.c_str());
  failures += condition ? 0 : 1;
}

// Takes every descriptor left under a lowered limit; gives them back when it goes.
class descriptor_hog {
 public:
  descriptor_hog() {
    ::getrlimit(RLIMIT_NOFILE, &original_);
    rlimit tight = original_;
    tight.rlim_cur = 64;
    ::setrlimit(RLIMIT_NOFILE, &tight);
    for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) {
      taken_.push_back(fd);
    }
  }
  descriptor_hog(const descriptor_hog&) = delete;
  descriptor_hog& operator=(const descriptor_hog&) = delete;
  ~descriptor_hog() { release(); }

  void release() {
    for (int fd : taken_) {
      ::close(fd);
    }
    taken_.clear();
    ::setrlimit(RLIMIT_NOFILE, &original_);
  }

 private:
  rlimit original_{};
  std::vector<int> taken_;
};

struct outcome {
  int error_code_form = 0;     // the errno read_some(buffer, error) stored
  std::string throwing_form;   // what read_some(buffer) threw
  std::string after_release;   // what a read returned once descriptors were back
  corio::io_backend backend = corio::io_backend::automatic;
};

// On a runtime's worker whose reactor does not exist yet: two reads while out of descriptors, then
// one after. `peer` has written "hi" to `stream`'s other end.
corio::task<outcome> first_reads_out_of_descriptors(corio::net::tcp_stream& stream, descriptor_hog& hog) {
  outcome seen;
  std::byte buffer[8];
  std::error_code error;
  co_await stream.read_some(buffer, error);
  // By value and address: no error_category member call while descriptors are exhausted.
  seen.error_code_form = &error.category() == &std::system_category() ? error.value() : -1;
  try {
    co_await stream.read_some(buffer);
  } catch (const std::system_error& failure) {
    seen.throwing_form = failure.code().value() == EMFILE ? failure.what() : "another error";
  }
  hog.release();
  std::size_t n = co_await stream.read_some(buffer);
  seen.after_release.assign(reinterpret_cast<const char*>(buffer), n);
  seen.backend = corio::current_io_backend();
  co_return seen;
}

// A socketpair whose first end is a stream with `text` waiting to be read.
struct loaded_pair {
  explicit loaded_pair(const char* text) {
    int ends[2];
    ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, ends);
    ::send(ends[1], text, std::char_traits<char>::length(text), MSG_NOSIGNAL);  // "" sends nothing
    stream = corio::net::tcp_stream(ends[0]);
    peer = ends[1];
  }
  ~loaded_pair() { ::close(peer); }
  loaded_pair(const loaded_pair&) = delete;
  loaded_pair& operator=(const loaded_pair&) = delete;

  corio::net::tcp_stream stream;
  int peer;
};

void check_runtime(corio::io_backend requested, corio::io_backend expected) {
  std::string name(to_string(requested));
  loaded_pair pair("hi");
  corio::runtime rt(corio::test::runtime_options(requested, 1));
  // Warm-up without I/O: with every descriptor taken, UBSan cannot check a vptr it has not seen yet
  // (its memory probe needs a pipe), so the executor's types are seen here first.
  rt.block_on([]() -> corio::task<void> { co_return; }());
  try {
    throw std::system_error(std::make_error_code(std::errc::too_many_files_open), "warm-up");
  } catch (const std::system_error& failure) {
    expect(failure.code().value() == EMFILE && std::string(failure.what()).find("warm-up") == 0, name + ": warm-up");
  }
  descriptor_hog hog;
  outcome seen = rt.block_on(first_reads_out_of_descriptors(pair.stream, hog));
  expect(seen.error_code_form == EMFILE, name + ": the error_code form stores EMFILE (" +
                                             std::to_string(seen.error_code_form) + ")");
  expect(seen.throwing_form.find("corio::net::tcp_stream::read_some") != std::string::npos,
         name + ": the throwing form names the operation ('" + seen.throwing_form + "')");
  expect(seen.after_release == "hi", name + ": the read after descriptors free up works ('" + seen.after_release + "')");
  expect(seen.backend == expected, name + ": it ran on " + std::string(to_string(seen.backend)) + ", expected " +
                                       std::string(to_string(expected)));
}

// One read on a runtime of `backend`, so that UBSan has seen its reactor's types (see the warm-up
// above) before a reactor of that kind is made out of descriptors.
void warm_up_reactor(corio::io_backend backend) {
  loaded_pair pair("w");
  corio::runtime rt(corio::test::runtime_options(backend, 1));
  rt.block_on([](corio::net::tcp_stream& from) -> corio::task<void> {
    std::byte buffer[1];
    co_await from.read_some(buffer);
  }(pair.stream));
}

// Waits (bounded) until `flag` is set, without suspending: it holds its worker.
bool spin_until(const std::atomic<bool>& flag) {
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!flag.load()) {
    if (std::chrono::steady_clock::now() > give_up) {
      return false;
    }
  }
  return true;
}

// Step 5. A task `holder` does the runtime's first I/O (its worker, A, makes a reactor), then holds A
// without suspending; so the task spawned next runs on the other worker, B, which has never done I/O.
// Out of descriptors, B cannot make a reactor: its read must be handed to A, which serves it once
// the holder lets A go (after the reader has started).
void check_stand_in(corio::io_backend backend) {
  std::string name(to_string(backend));
  loaded_pair first("");
  loaded_pair second("b");
  corio::runtime rt(corio::test::runtime_options(backend, 2));
  std::atomic<bool> holding{false};
  std::atomic<bool> reader_started{false};
  auto holder = rt.spawn([](corio::net::tcp_stream& stream, std::atomic<bool>& holding,
                            std::atomic<bool>& reader_started) -> corio::task<bool> {
    std::byte buffer[1];
    co_await stream.read_some(buffer);
    holding = true;
    co_return spin_until(reader_started);
  }(first.stream, holding, reader_started));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ::send(first.peer, "a", 1, MSG_NOSIGNAL);  // the holder's worker waited in its reactor (UBSan has seen it)
  expect(spin_until(holding), name + ": the holder did its read and holds its worker");
  std::string got;
  {
    descriptor_hog hog;
    auto reader = rt.spawn([](corio::net::tcp_stream& stream, std::atomic<bool>& started) -> corio::task<std::string> {
      started = true;
      std::byte buffer[8];
      std::error_code error;
      std::size_t n = co_await stream.read_some(buffer, error);
      co_return error ? "error " + std::to_string(error.value()) : std::string(reinterpret_cast<const char*>(buffer), n);
    }(second.stream, reader_started));
    got = rt.block_on([](corio::join_handle<std::string> reader) -> corio::task<std::string> {
      co_return co_await std::move(reader);
    }(std::move(reader)));
  }
  bool held = rt.block_on([](corio::join_handle<bool> holder) -> corio::task<bool> {
    co_return co_await std::move(holder);
  }(std::move(holder)));
  expect(held, name + ": the reader started while the holder held the other worker");
  expect(got == "b", name + ": the read on the worker without a reactor was served by the other ('" + got + "')");
}

}  // namespace

int main() {
  ::unsetenv("CORIO_BACKEND");
  bool ring_works = corio::test::io_uring_setup_error() == 0;
  check_runtime(corio::io_backend::automatic, ring_works ? corio::io_backend::io_uring : corio::io_backend::epoll);
  warm_up_reactor(corio::io_backend::epoll);
  check_runtime(corio::io_backend::epoll, corio::io_backend::epoll);
  check_stand_in(corio::io_backend::epoll);
  if (ring_works) {
    check_stand_in(corio::io_backend::io_uring);
  }
  return failures == 0 ? 0 : 1;
}
