// Consumes an installed corio: lazy tasks awaiting each other, driven by sync_wait.
// Exits 0 only if the value that comes back is right.
#include <corio/sync_wait.hpp>
#include <corio/task.hpp>

#include <cstdio>

namespace {

corio::task<int> answer() { co_return 21; }

corio::task<int> twice() {
  const int a = co_await answer();
  const int b = co_await answer();
  co_return a + b;
}

}  // namespace

int main() {
  const int value = corio::sync_wait(twice());
  if (value != 42) {
    std::fprintf(stderr, "consumer: expected 42, got %d\n", value);
    return 1;
  }
  std::puts("consumer: ok (42)");
  return 0;
}
