// Backend selection, made once per process and logged in one line; see reactor.hpp.
#include "io/reactor.hpp"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

namespace corio::detail {
namespace {

struct choice {
  io_backend backend;
  std::string reason;
};

choice decide_automatic() {
  if (const char* forced = std::getenv("CORIO_BACKEND"); forced != nullptr && *forced != '\0') {
    std::string_view name(forced);
    if (name == "io_uring") {
      return {io_backend::io_uring, "CORIO_BACKEND=io_uring"};
    }
    if (name == "epoll") {
      return {io_backend::epoll, "CORIO_BACKEND=epoll"};
    }
    throw std::system_error(std::make_error_code(std::errc::invalid_argument),
                            "corio: CORIO_BACKEND must be io_uring or epoll, not '" + std::string(name) + "'");
  }
  if (int error = probe_io_uring(); error == EMFILE || error == ENFILE) {
    // Out of descriptors says nothing about io_uring: decide at the next reactor's creation (resolve()
    // keeps no choice that threw), rather than leave the process on epoll for good.
    throw std::system_error(error, std::system_category(), "corio: choosing the I/O backend: io_uring_setup");
  } else if (error != 0) {
    return {io_backend::epoll, std::string("io_uring unavailable: io_uring_setup failed: ") + std::strerror(error)};
  }
  return {io_backend::io_uring, "io_uring_setup works here"};
}

// Once per process: resolves `automatic`. A mutex, not call_once: a choice that throws (out of
// descriptors) is made again by the next reactor, and ThreadSanitizer's call_once never lets go of a
// call that threw. The returned reason lives as long as the process (the kept choice, or a literal).
std::pair<io_backend, const char*> resolve(io_backend requested) {
  static std::mutex mutex;
  static std::optional<choice> automatic;
  std::lock_guard lock(mutex);
  if (requested != io_backend::automatic) {
    return {requested, "requested by the executor's options"};
  }
  if (!automatic) {
    automatic = decide_automatic();
  }
  return {automatic->backend, automatic->reason.c_str()};
}

// The one log line, for the first reactor that was set up: it says what that reactor uses and why.
// Only once one was, so a requested backend that cannot be set up (which throws) is never logged as
// the one in use.
void log_first(io_backend used, const char* why) {
  static std::atomic<bool> logged{false};
  if (!logged.exchange(true, std::memory_order_relaxed)) {
    std::fprintf(stderr, "corio: I/O backend %s (%s)\n", to_string(used).data(), why);
  }
}

}  // namespace

std::unique_ptr<reactor> make_reactor(io_backend requested, bool thread_bound) {
  const auto [backend, why] = resolve(requested);
  std::unique_ptr<reactor> made = backend == io_backend::io_uring ? make_uring_reactor(thread_bound) : make_epoll_reactor();
  log_first(backend, why);
  return made;
}

}  // namespace corio::detail
