#pragma once
// Test helpers for running coroutines on event loops.
#include <corio/errors.hpp>
#include <corio/event_loop.hpp>
#include <corio/task.hpp>

#include <thread>
#include <utility>

namespace corio::test {

// Runs `body` on `loop`, driven by run() on this thread, until it finishes.
template <class Body>
void run_on(corio::event_loop& loop, Body body) {
  auto wrapper = [&]() -> corio::task<void> {
    try {
      co_await body();
    } catch (...) {
      loop.stop();
      throw;
    }
    loop.stop();
  };
  loop.spawn(wrapper());
  loop.run();
}

// Runs `body` on a fresh loop driven by run() on this thread until it finishes.
template <class Body>
void run_on_loop(Body body) {
  corio::event_loop loop;
  run_on(loop, std::move(body));
}

// An event loop running on its own thread until destroyed.
struct loop_thread {
  corio::event_loop loop;
  std::thread thread{[this] { loop.run(); }};
  ~loop_thread() {
    loop.stop();
    thread.join();
  }
  // Thread-safe: hands `body` to the loop thread, which spawns it there (or drops it, unrun, if the
  // loop was stopped meanwhile).
  void spawn(corio::task<void> body) {
    loop.post([this, body = std::move(body)]() mutable {
      try {
        loop.spawn(std::move(body));
      } catch (const corio::loop_stopped&) {
      }
    });
  }
};

}  // namespace corio::test
