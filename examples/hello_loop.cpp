// The smallest corio program: two tasks take turns on one event loop while another thread posts
// work to it. Shows: task, spawn, yield, post, run_until_idle.
#include <corio/event_loop.hpp>
#include <corio/task.hpp>

#include <cstdio>
#include <thread>

corio::task<void> ping(const char* name, int times) {
  for (int i = 0; i < times; ++i) {
    std::printf("%s %d\n", name, i);
    co_await corio::yield();  // let the other task run
  }
}

int main() {
  corio::event_loop loop;
  loop.spawn(ping("ping", 3));
  loop.spawn(ping("pong", 3));
  std::thread helper([&] { loop.post([] { std::puts("posted from another thread"); }); });
  helper.join();
  loop.run_until_idle();
}
