#pragma once
// corio::io_backend: which kernel interface the reactors of an event loop or runtime use for I/O.
#include <string_view>

namespace corio {

/// The reactor backend. `automatic` picks io_uring when a ring can be set up on this machine, else
/// epoll, unless the environment variable CORIO_BACKEND=io_uring|epoll forces one; the choice is made
/// once per process (a process out of descriptors at its first I/O fails that operation with EMFILE
/// and chooses at its next), and the first reactor set up logs one line on stderr saying what it uses
/// and why. Naming a backend (runtime::options::backend, event_loop's constructor) overrides both;
/// naming io_uring where no ring can be set up, or setting CORIO_BACKEND to anything else, makes every
/// I/O operation fail with std::system_error, its error_code forms included (a configuration error,
/// not an operation's), never a silent fallback.
enum class io_backend : unsigned char { automatic, io_uring, epoll };

/// "automatic", "io_uring" or "epoll".
constexpr std::string_view to_string(io_backend backend) noexcept {
  switch (backend) {
    case io_backend::io_uring:
      return "io_uring";
    case io_backend::epoll:
      return "epoll";
    case io_backend::automatic:
      break;
  }
  return "automatic";
}

/// The backend of the reactor that I/O awaited on the calling thread uses: its event loop's or runtime
/// worker's. io_backend::automatic if the thread runs no executor, or has done no I/O yet (reactors
/// are created on first use). For tests and diagnostics; thread-safe.
io_backend current_io_backend() noexcept;

}  // namespace corio
