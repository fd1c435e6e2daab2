// The io_uring-unavailable path, for real: this process installs a seccomp filter that makes
// io_uring_setup fail the way a container's profile does (EPERM by default, or the errno named in
// argv[1]: ENOSYS), then checks that corio
//   1. picks epoll by itself (CORIO_BACKEND unset) on a runtime and on an event loop,
//   2. says so, and why, in exactly one log line on stderr,
//   3. still serves an echo, and
//   4. refuses with a clear std::system_error when io_uring is asked for by name.
// The filter denies membarrier(2) too (some profiles do), so the post queue's stopping handshake
// runs on its seq_cst fallback here:
//   5. posts racing stop() still all run, or are refused.
// Exit 0: all held; 1: a check failed; 77: seccomp filters cannot be installed here (skipped).
#include <corio/event_loop.hpp>
#include <corio/io_backend.hpp>
#include <corio/runtime.hpp>

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "support/net.hpp"
#include "support/post_stop_race.hpp"

namespace {

#if defined(__x86_64__)
constexpr unsigned this_arch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr unsigned this_arch = AUDIT_ARCH_AARCH64;
#else
#error "fallback test: add this architecture's AUDIT_ARCH"
#endif

bool deny_io_uring_setup_and_membarrier(int error) {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, this_arch, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 1, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_membarrier, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (static_cast<unsigned>(error) & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog program{static_cast<unsigned short>(std::size(filter)), filter};
  return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) == 0;
}

int failures = 0;
FILE* report = stdout;

void expect(bool condition, const std::string& what) {
  std::fprintf(report, "%s: %s\n", condition ? "ok  " : "FAIL", what.c_str());
  failures += condition ? 0 : 1;
}

corio::task<std::string> echo_and_backend() {
  auto listener = corio::net::tcp_listener::bind(corio::net::endpoint::loopback_v4(0));
  auto serving = corio::spawn(
      [](corio::net::tcp_listener& l) -> corio::task<void> { co_await corio::test::echo_connection(co_await l.accept()); }(
          listener));
  std::string reply = co_await corio::test::echo_once(listener.local_endpoint(), "still works");
  co_await std::move(serving);
  co_return reply + " on " + std::string(to_string(corio::current_io_backend()));
}

}  // namespace

int main(int argc, char** argv) {
  int error = argc > 1 && std::strcmp(argv[1], "ENOSYS") == 0 ? ENOSYS : EPERM;
  ::unsetenv("CORIO_BACKEND");
  if (!deny_io_uring_setup_and_membarrier(error)) {
    std::printf("skipped: cannot install a seccomp filter here: %s\n", std::strerror(errno));
    return 77;
  }
  expect(corio::test::io_uring_setup_error() == error,
         std::string("the filter makes io_uring_setup fail with ") + std::strerror(error));

  // Capture stderr, where corio logs its backend choice.
  std::FILE* log = std::tmpfile();
  int saved_stderr = ::dup(2);
  ::dup2(::fileno(log), 2);

  // First, so that the log would show a line for it: a backend that could not be set up is not logged.
  std::string forced_error;
  try {
    corio::runtime rt(corio::test::runtime_options(corio::io_backend::io_uring));
    rt.block_on([]() -> corio::task<void> {
      auto listener = corio::net::tcp_listener::bind(corio::net::endpoint::loopback_v4(0));
      co_await corio::net::tcp_stream::connect(listener.local_endpoint());  // the first I/O creates the reactor
    }());
  } catch (const std::system_error& e) {
    forced_error = e.what();
  }
  expect(forced_error.find("io_uring") != std::string::npos && forced_error.find(std::strerror(error)) != std::string::npos,
         "forcing io_uring fails clearly: '" + forced_error + "'");

  {
    // One worker, so the root resumes where the I/O ran (a second worker may have no reactor yet).
    corio::runtime rt(corio::test::runtime_options(corio::io_backend::automatic, 1));
    std::string got = rt.block_on(echo_and_backend());
    expect(got == "still works on epoll", "runtime: echo on the fallback backend (" + got + ")");
  }
  std::string on_loop;
  corio::test::run_on_loop(corio::io_backend::automatic,
                           [&]() -> corio::task<void> { on_loop = co_await echo_and_backend(); });
  expect(on_loop == "still works on epoll", "event loop: echo on the fallback backend (" + on_loop + ")");

  expect(!corio::detail::membarrier_registered(), "the post queue found membarrier denied");
  expect(corio::test::rounds_with_accepted_posts_unrun(20) == 0,
         "posts racing stop() all run or are refused (without membarrier)");

  std::fflush(stderr);
  ::dup2(saved_stderr, 2);
  std::string logged;
  std::rewind(log);
  for (int c; (c = std::fgetc(log)) != EOF;) {
    logged += static_cast<char>(c);
  }
  std::string expected_line = std::string("corio: I/O backend epoll (io_uring unavailable: io_uring_setup failed: ") +
                              std::strerror(error) + ")\n";
  expect(logged == expected_line, "one log line says which backend and why; stderr was: '" + logged + "'");
  return failures == 0 ? 0 : 1;
}
