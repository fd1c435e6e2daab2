#include <atomic>
#include <thread>
int main() {
  std::atomic<int> x{0};
  std::thread t([&] { x.fetch_add(1); });
  t.join();
  return x.load() == 1 ? 0 : 1;
}
