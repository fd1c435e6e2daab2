// How the server examples stop: SIGINT and SIGTERM are blocked before the runtime starts (its workers
// inherit the mask, so no worker is interrupted by them) and taken by sigwait on the main thread.
#pragma once
#include <signal.h>

#include <csignal>

namespace example {

class stop_signals {
 public:
  /// Blocks SIGINT and SIGTERM in the calling thread; make this before any thread that must not get them.
  /// Also ignores SIGPIPE: a reader of stdout gone (server | head -1) fails a print instead of killing.
  stop_signals() noexcept {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);
    std::signal(SIGPIPE, SIG_IGN);
  }

  /// Waits for SIGINT or SIGTERM; returns which.
  int wait() const noexcept {
    int signal = 0;
    sigwait(&set_, &signal);
    return signal;
  }

 private:
  sigset_t set_;
};

}  // namespace example
