// A three-stage pipeline on the multi-thread runtime: a producer generates numbers, two workers square
// them, and the sink collects results with select: a result, a control message, or a timeout.
// Shows: channel (bounded MPMC, close by dropping the last sender), select with a timeout branch,
// oneshot for the reply to a control request.
#include <corio/channel.hpp>
#include <corio/join_handle.hpp>
#include <corio/oneshot.hpp>
#include <corio/runtime.hpp>
#include <corio/select.hpp>

#include <chrono>
#include <cstdio>
#include <variant>

using namespace std::chrono_literals;

corio::task<void> produce(corio::sender<int> out, int count) {
  for (int i = 1; i <= count; ++i) {
    if (!co_await out.send(int{i})) {
      co_return;  // everyone downstream is gone
    }
  }
}  // the last sender goes: the channel closes once the workers have drained it

corio::task<void> square(corio::receiver<int> in, corio::sender<long> out) {
  while (std::optional<int> n = co_await in.recv()) {
    (void)co_await out.send(long{*n} * *n);
  }
}

// Collects results until the workers are done; answers "how far are you?" requests meanwhile, and
// says so when nothing arrived for a while.
corio::task<long> sink(corio::receiver<long> results, corio::receiver<corio::oneshot_sender<long>> progress) {
  long sum = 0;
  for (;;) {
    auto event = co_await corio::select(results.recv(), progress.recv(), corio::after(100ms));
    if (event.index() == 0) {
      std::optional<long> square = std::get<0>(event);
      if (!square) {
        co_return sum;  // every worker finished and the channel is drained
      }
      sum += *square;
    } else if (event.index() == 1) {
      if (auto reply = std::move(std::get<1>(event))) {
        (void)reply->send(long{sum});
      }
    } else {
      std::puts("sink: nothing for 100 ms");
    }
  }
}

corio::task<long> run() {
  constexpr int count = 10'000;
  auto [numbers_tx, numbers_rx] = corio::channel<int>(64);
  auto [squares_tx, squares_rx] = corio::channel<long>(64);
  auto [progress_tx, progress_rx] = corio::channel<corio::oneshot_sender<long>>(1);
  auto total = corio::spawn(sink(std::move(squares_rx), std::move(progress_rx)));
  auto first = corio::spawn(square(numbers_rx, squares_tx));
  auto second = corio::spawn(square(std::move(numbers_rx), std::move(squares_tx)));
  auto producer = corio::spawn(produce(std::move(numbers_tx), count));

  auto [reply_tx, reply_rx] = corio::oneshot<long>();
  if (co_await progress_tx.send(std::move(reply_tx))) {
    std::optional<long> so_far = co_await reply_rx;
    std::printf("progress: sum so far %ld\n", so_far.value_or(-1));
  }
  co_await std::move(producer);
  co_await std::move(first);
  co_await std::move(second);
  co_return co_await std::move(total);
}

int main() {
  corio::runtime rt;
  long sum = rt.block_on(run());
  long expected = 0;
  for (long i = 1; i <= 10'000; ++i) {
    expected += i * i;
  }
  std::printf("sum of squares: %ld (%s)\n", sum, sum == expected ? "ok" : "WRONG");
  return sum == expected ? 0 : 1;
}
