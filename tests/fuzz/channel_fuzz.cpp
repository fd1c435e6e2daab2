// libFuzzer target: random sequences of channel operations against a sequential reference model.
//
// Two channels A and B (capacities from the input: rendezvous, 1-3, or unbounded) on one event_loop.
// Each input byte pair is one step: start an operation in a new task (send, recv, select over recv on
// A and B), or do one from the driver (try_send, try_recv, close, cancel a parked task, or hand a
// value to a parked receiver and cancel that receiver before it resumes). After each step the loop
// runs until idle, so every task is either finished or parked, and the state is deterministic: the
// model (buffers, FIFO lists of parked operations, closed flags) predicts exactly which task finished
// with what, and at the end what each buffer holds, in order. Any difference aborts. ASan/UBSan/LSan
// check the rest, including the loop destroyed with tasks still parked.
#include <corio/channel.hpp>
#include <corio/event_loop.hpp>
#include <corio/select.hpp>
#include <corio/task.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <optional>
#include <stop_token>
#include <vector>

#include "support/cancel.hpp"

namespace {

constexpr std::size_t unbounded = SIZE_MAX;

[[noreturn]] void mismatch(const char* what, long step) {
  std::fprintf(stderr, "channel_fuzz: model mismatch at step %ld: %s\n", step, what);
  std::abort();
}

// The outcome of one task's operation: still parked, or how it finished.
struct outcome {
  enum kind : std::uint8_t { pending, value, closed, sent, not_sent, cancelled } what = pending;
  long payload = 0;     // the value received
  std::size_t branch = 0;  // select: which channel
  friend bool operator==(const outcome&, const outcome&) = default;
};

struct op {
  enum kind : std::uint8_t { send, recv, select };
  op(kind k, int c, long v) : what(k), channel(c), value(v) {}
  kind what;
  int channel;  // send/recv: 0 or 1
  long value;   // send
  std::stop_source stop;
  std::stop_token token = stop.get_token();
  outcome actual;
  outcome expected;
};

// ---- the reference model ----
struct model_channel {
  std::size_t capacity = 0;
  std::deque<long> buffer;
  std::deque<op*> receivers;  // parked recv/select operations, oldest first (may hold finished ones)
  std::deque<op*> senders;    // parked sends, oldest first
  bool closed = false;
  bool end_told = false;  // a receiver got "closed and drained": nothing is given back after that

  static op* first_pending(std::deque<op*>& list) {
    while (!list.empty()) {
      op* front = list.front();
      list.pop_front();
      if (front->expected.what == outcome::pending) {
        return front;
      }
    }
    return nullptr;
  }
};

struct model {
  model_channel channels[2];

  static void finish_recv(op& o, int channel, outcome::kind what, long payload = 0) {
    o.expected = outcome{what, payload, static_cast<std::size_t>(channel)};
  }

  // A value offered to channel c (by a send or try_send). True if accepted.
  bool offer(int c, long value) {
    model_channel& ch = channels[c];
    if (ch.closed) {
      return false;
    }
    if (op* receiver = model_channel::first_pending(ch.receivers)) {
      finish_recv(*receiver, c, outcome::value, value);
      return true;
    }
    if (ch.buffer.size() < ch.capacity) {
      ch.buffer.push_back(value);
      return true;
    }
    return false;
  }
  // A receive now on channel c: a value, closed, or nothing (would wait).
  std::optional<outcome> take(int c) {
    model_channel& ch = channels[c];
    if (!ch.buffer.empty()) {
      long value = ch.buffer.front();
      ch.buffer.pop_front();
      if (ch.buffer.size() < ch.capacity) {
        if (op* sender = model_channel::first_pending(ch.senders)) {
          ch.buffer.push_back(sender->value);
          sender->expected.what = outcome::sent;
        }
      }
      return outcome{outcome::value, value, static_cast<std::size_t>(c)};
    }
    if (op* sender = model_channel::first_pending(ch.senders)) {
      sender->expected.what = outcome::sent;
      return outcome{outcome::value, sender->value, static_cast<std::size_t>(c)};
    }
    if (ch.closed) {
      ch.end_told = true;
      return outcome{outcome::closed, 0, static_cast<std::size_t>(c)};
    }
    return std::nullopt;
  }
  void close(int c) {
    model_channel& ch = channels[c];
    if (ch.closed) {
      return;
    }
    ch.closed = true;
    while (op* receiver = model_channel::first_pending(ch.receivers)) {
      finish_recv(*receiver, c, outcome::closed);
      ch.end_told = true;
    }
    while (op* sender = model_channel::first_pending(ch.senders)) {
      sender->expected.what = outcome::not_sent;
    }
  }
  // A value given back by a cancelled receiver: to the next parked receiver, else the front. False
  // (the receiver keeps it) once a receiver was told the channel is closed and drained.
  bool give_back(int c, long value) {
    model_channel& ch = channels[c];
    if (ch.end_told) {
      return false;
    }
    if (op* receiver = model_channel::first_pending(ch.receivers)) {
      finish_recv(*receiver, c, outcome::value, value);
      return true;
    }
    ch.buffer.push_front(value);
    return true;
  }
};

// ---- the tasks ----
corio::task<void> run_send(corio::sender<long>& tx, op& o) {
  long value = o.value;
  try {
    bool ok = co_await tx.send(std::move(value));
    o.actual.what = ok ? outcome::sent : outcome::not_sent;
  } catch (const corio::cancelled&) {
    o.actual.what = outcome::cancelled;
  }
}

corio::task<void> run_recv(corio::receiver<long>& rx, op& o) {
  try {
    std::optional<long> v = co_await rx.recv();
    o.actual = v ? outcome{outcome::value, *v, static_cast<std::size_t>(o.channel)}
                 : outcome{outcome::closed, 0, static_cast<std::size_t>(o.channel)};
  } catch (const corio::cancelled&) {
    o.actual.what = outcome::cancelled;
  }
}

corio::task<void> run_select(corio::receiver<long>& a, corio::receiver<long>& b, op& o) {
  try {
    auto r = co_await corio::select_biased(a.recv(), b.recv());
    const std::optional<long>& v = r.index() == 0 ? std::get<0>(r) : std::get<1>(r);
    o.actual = v ? outcome{outcome::value, *v, r.index()} : outcome{outcome::closed, 0, r.index()};
  } catch (const corio::cancelled&) {
    o.actual.what = outcome::cancelled;
  }
}

std::size_t capacity_of(std::uint8_t byte) {
  switch (byte % 5) {
    case 0: return 0;
    case 4: return unbounded;
    default: return byte % 5;
  }
}

std::pair<corio::sender<long>, corio::receiver<long>> make(std::size_t capacity) {
  return capacity == unbounded ? corio::unbounded_channel<long>() : corio::channel<long>(capacity);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) {
    return 0;
  }
  model m;
  m.channels[0].capacity = capacity_of(data[0]);
  m.channels[1].capacity = capacity_of(data[1]);
  auto [a_tx, a_rx] = make(m.channels[0].capacity);
  auto [b_tx, b_rx] = make(m.channels[1].capacity);
  corio::sender<long>* tx[2] = {&a_tx, &b_tx};
  corio::receiver<long>* rx[2] = {&a_rx, &b_rx};
  std::deque<op> ops;  // stable addresses
  long next_value = 1;
  {
    corio::event_loop loop;
    for (std::size_t i = 2; i + 1 < size && ops.size() < 256; i += 2) {
      std::uint8_t code = data[i];
      std::uint8_t arg = data[i + 1];
      int c = arg & 1;
      long step = static_cast<long>(i / 2);
      switch (code % 8) {
        case 0: {  // a task sends
          op& o = ops.emplace_back(op::send, c, next_value++);
          if (m.offer(c, o.value)) {
            o.expected.what = outcome::sent;
          } else if (m.channels[c].closed) {
            o.expected.what = outcome::not_sent;
          } else {
            m.channels[c].senders.push_back(&o);
          }
          loop.spawn(corio::test::cancellable_by(o.token, run_send(*tx[c], o)));
          break;
        }
        case 1: {  // a task receives
          op& o = ops.emplace_back(op::recv, c, 0);
          if (auto now = m.take(c)) {
            o.expected = *now;
          } else {
            m.channels[c].receivers.push_back(&o);
          }
          loop.spawn(corio::test::cancellable_by(o.token, run_recv(*rx[c], o)));
          break;
        }
        case 2: {  // a task selects over recv on A and B (biased: A first)
          op& o = ops.emplace_back(op::select, 0, 0);
          if (auto now = m.take(0)) {
            o.expected = *now;
          } else if (auto other = m.take(1)) {
            o.expected = *other;
          } else {
            m.channels[0].receivers.push_back(&o);
            m.channels[1].receivers.push_back(&o);
          }
          loop.spawn(corio::test::cancellable_by(o.token, run_select(a_rx, b_rx, o)));
          break;
        }
        case 3: {  // the driver try_sends
          long value = next_value++;
          bool closed = m.channels[c].closed;
          bool model_ok = m.offer(c, value);
          long sent = value;
          corio::channel_status status = tx[c]->try_send(std::move(sent));
          corio::channel_status expected = model_ok ? corio::channel_status::ok
                                           : closed ? corio::channel_status::closed
                                                    : corio::channel_status::full;
          if (status != expected || (!model_ok && sent != value)) {
            mismatch("try_send status", step);
          }
          break;
        }
        case 4: {  // the driver try_recvs
          auto got = rx[c]->try_recv();
          auto now = m.take(c);
          corio::channel_status expected = !now                            ? corio::channel_status::empty
                                           : now->what == outcome::closed ? corio::channel_status::closed
                                                                          : corio::channel_status::ok;
          if (got.status != expected || (now && now->what == outcome::value && got.value != now->payload)) {
            mismatch("try_recv", step);
          }
          break;
        }
        case 5:  // close (alternately from the sending and the receiving side)
          if (arg & 2) {
            tx[c]->close();
          } else {
            rx[c]->close();
          }
          m.close(c);
          break;
        case 6: {  // cancel a parked task
          if (ops.empty()) {
            break;
          }
          op& o = ops[arg % ops.size()];
          if (o.expected.what == outcome::pending) {
            o.expected.what = outcome::cancelled;
          }
          o.stop.request_stop();
          break;
        }
        case 7: {  // hand a value to a parked receiver, maybe close, then cancel it before it resumes
          op* first = nullptr;
          for (op* r : m.channels[c].receivers) {
            if (r->expected.what == outcome::pending) {
              first = r;
              break;
            }
          }
          long value = next_value++;
          bool model_ok = m.offer(c, value);  // to `first`, if there is one
          long sent = value;
          if ((tx[c]->try_send(std::move(sent)) == corio::channel_status::ok) != model_ok) {
            mismatch("try_send before a cancel", step);
          }
          if (arg & 2) {
            tx[c]->close();
            m.close(c);
          }
          if (first != nullptr) {
            first->stop.request_stop();  // it resumes holding the value: gives it back, or keeps it
            if (m.give_back(c, value)) {
              first->expected = outcome{outcome::cancelled};
            }
          }
          break;
        }
      }
      loop.run_until_idle();
      for (const op& o : ops) {
        if (!(o.actual == o.expected)) {
          mismatch("task outcome", step);
        }
      }
    }
  }  // the loop is destroyed with parked tasks: they must unregister cleanly
  for (int c = 0; c < 2; ++c) {
    for (long expected : m.channels[c].buffer) {
      auto got = rx[c]->try_recv();
      if (!got || got.value != expected) {
        mismatch("final buffer contents", -1);
      }
    }
    if (rx[c]->try_recv()) {
      mismatch("final buffer holds more than the model", -1);
    }
  }
  return 0;
}
