// A loop's or worker's reactor slot, and the I/O awaiter; the design notes are in
// include/corio/detail/io_slot.hpp and include/corio/detail/io_op.hpp.
#include <corio/detail/io_slot.hpp>

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include <corio/detail/accept_stash.hpp>
#include <corio/detail/datagram_stash.hpp>
#include <corio/detail/io_source.hpp>
#include <corio/errors.hpp>
#include <corio/net/error.hpp>

#include "io/fd_records.hpp"
#include "io/io_source_state.hpp"
#include "io/reactor.hpp"

namespace corio {

io_backend current_io_backend() noexcept {
  detail::io_slot* slot = detail::current_io_slot;
  return slot != nullptr ? slot->backend() : io_backend::automatic;
}

namespace detail {

thread_local constinit io_slot* current_io_slot = nullptr;

io_slot::scope::scope(io_slot& slot) noexcept : previous_(current_io_slot) { current_io_slot = &slot; }

io_slot::scope::~scope() { current_io_slot = previous_; }

io_slot::~io_slot() {
  shutdown();
  delete reactor_;
}

namespace {

// What a hand-off finds in a shut-down slot's queue: never an op's address.
io_op* closed_marker() noexcept {
  static io_op marker;
  return &marker;
}

// The same for the queue of released sources.
io_source* closed_release_marker() noexcept {
  static io_source marker;
  return &marker;
}

// A receive's message has one buffer and room for the sender's address
// (net::detail::message_awaiter::prepare). A kept datagram into it, as recvmsg would place it: cut to
// the buffer (MSG_TRUNC), the sender's address cut to the room for it, its full length in
// msg_namelen. Returns the bytes placed.
std::int32_t receive_kept(msghdr& message, const datagram_stash::kept& datagram) noexcept {
  const iovec& buffer = message.msg_iov[0];
  std::size_t placed = std::min(buffer.iov_len, datagram.bytes.size());
  std::copy_n(datagram.bytes.data(), placed, static_cast<std::byte*>(buffer.iov_base));
  std::copy_n(reinterpret_cast<const std::byte*>(&datagram.sender),
              std::min(message.msg_namelen, datagram.sender_length), static_cast<std::byte*>(message.msg_name));
  message.msg_namelen = datagram.sender_length;
  message.msg_flags = datagram.truncated || placed < datagram.bytes.size() ? MSG_TRUNC : 0;
  return static_cast<std::int32_t>(placed);
}

// What a receive that completed with `received` bytes got, kept whole for the next receive.
datagram_stash::kept kept_from(const msghdr& message, std::size_t received) {
  datagram_stash::kept datagram;
  auto* bytes = static_cast<const std::byte*>(message.msg_iov[0].iov_base);
  datagram.bytes.assign(bytes, bytes + received);
  datagram.sender_length = std::min<socklen_t>(message.msg_namelen, sizeof(datagram.sender));
  std::copy_n(static_cast<const std::byte*>(message.msg_name), datagram.sender_length,
              reinterpret_cast<std::byte*>(&datagram.sender));
  datagram.truncated = (message.msg_flags & MSG_TRUNC) != 0;
  return datagram;
}

}  // namespace

io_slot::submitted io_slot::submit(io_op& op, io_awaiter& awaiter) {
  if (shut_down_) {
    op.result = -ECANCELED;  // unreachable through the executors: nothing runs on a slot after shutdown
    return submitted::finished;
  }
  io_slot* target = route(op);
  if (target == nullptr) {
    return submitted::finished;  // refused: route() set op.result
  }
  if (target != this) {
    return target->hand_off(op, awaiter);
  }
  op.slot = this;
  op.state.store(io_state::in_flight, std::memory_order_relaxed);  // published to a stop callback by its registration
  if (reactor_->submit(op)) {
    op.state.store(io_state::done, std::memory_order_relaxed);
    return submitted::finished;
  }
  ++pending_;
  return submitted::in_flight;
}

io_slot::submitted io_slot::hand_off(io_op& op, io_awaiter& awaiter) noexcept {
  op.awaiter = &awaiter;
  pin_source(op);
  op.slot = this;
  op.state.store(io_state::queued, std::memory_order_relaxed);  // published by the push
  // Seq_cst push, then the parker's seq_cst load: the request_cancel pair (below) for this queue.
  io_op* head = handed_.load(std::memory_order_relaxed);
  do {
    if (head == closed_marker()) {
      op.state.store(io_state::idle, std::memory_order_relaxed);
      op.result = -ECANCELED;  // the home worker has shut down
      unpin_source(op);
      return submitted::finished;
    }
    op.next = head;
  } while (!handed_.compare_exchange_weak(head, &op, std::memory_order_seq_cst, std::memory_order_relaxed));
  parker_.unpark_if_parked();
  return submitted::handed_off;
}

void io_slot::pin_source(io_op& op) noexcept {
  if (op.source == nullptr) {
    return;  // a stand-in's op on the descriptor (stand_in)
  }
  io_source* source = op.source->load(std::memory_order_acquire);  // claim_home homed it here: not null
  source->owners.fetch_add(1, std::memory_order_relaxed);  // the handing thread's socket still owns it
  op.pinned.store(source, std::memory_order_relaxed);     // both published by the hand-off's push
  op.source = &op.pinned;
}

void io_slot::unpin_source(io_op& op) noexcept {
  // Once per handed-off op, when the home took it or ended it. `source` keeps pointing at the pin: an
  // op left waiting on the source is kept by the reactor side (re-issues read it through the pin).
  if (io_source* source = op.pinned.load(std::memory_order_relaxed); source != nullptr) {
    drop_owner(*source);
  }
}

void io_slot::drain_handed_off() noexcept {
  io_op* stack = handed_.exchange(nullptr, std::memory_order_seq_cst);
  io_op* oldest_first = nullptr;
  while (stack != nullptr) {
    io_op* op = std::exchange(stack, stack->next);
    op->next = oldest_first;
    oldest_first = op;
  }
  while (oldest_first != nullptr) {
    io_op& op = *std::exchange(oldest_first, oldest_first->next);  // read before the op can finish
    take_handed_off(op);
  }
}

bool io_slot::hand_off_release(io_source& source) noexcept {
  // The hand-off queue's protocol: a seq_cst push, then the parker's Dekker wake-up. Once pushed, the
  // source is this slot's: the pushing thread touches it no more.
  io_source* head = releases_.load(std::memory_order_relaxed);
  do {
    if (head == closed_release_marker()) {
      return false;
    }
    source.next_released = head;
  } while (!releases_.compare_exchange_weak(head, &source, std::memory_order_seq_cst, std::memory_order_relaxed));
  parker_.unpark_if_parked();
  return true;
}

void io_slot::drain_releases() noexcept { release_each(releases_.exchange(nullptr, std::memory_order_seq_cst)); }

void io_slot::release_each(io_source* queued) noexcept {
  while (queued != nullptr) {
    io_source& released = *std::exchange(queued, queued->next_released);  // read before it is freed
    reactor_->release(released);
  }
}

void io_slot::take_handed_off(io_op& op) noexcept {
  ++handed_off_here_;
  io_state expected = io_state::queued;
  if (!op.state.compare_exchange_strong(expected, io_state::in_flight, std::memory_order_acq_rel)) {
    op.result = -ECANCELED;  // cancel_queued: its task was cancelled, or its deadline passed, on the way
    unpin_source(op);
    op.state.store(io_state::done, std::memory_order_relaxed);
    deliver(op);
    return;
  }
  const bool finished = reactor_->submit(op);
  unpin_source(op);  // waiting on the source from here, the op is kept by the reactor side
  if (finished) {
    // Finished at once, but a deadline's timer on the handing worker may have moved it to
    // cancel_requested since the CAS above and queued it here: then drain_cancel_requests() delivers
    // it, exactly once, as turn()'s sink leaves it to do (a plain store delivered it twice).
    if (op.state.exchange(io_state::done, std::memory_order_acq_rel) != io_state::cancel_requested) {
      deliver(op);
    }
    return;
  }
  ++pending_;
  op.awaiter->arm_cancellation();  // may run at once: request_cancel then queues it here
}

int io_slot::create_reactor() {
  try {
    reactor_ = make_reactor(requested_, thread_bound_).release();
  } catch (const std::system_error& failure) {
    int error = &failure.code().category() == &std::system_category() ? failure.code().value() : 0;
    if (error == EMFILE || error == ENFILE) {
      return -error;  // out of descriptors for the ring or eventfd: this operation fails, the next tries again
    }
    throw;
  }
  backend_.store(reactor_->kind(), std::memory_order_release);
  parker_.set_backend(this);
  return 0;
}

io_slot* io_slot::route(io_op& op) {
  if (op.fd < 0) {
    op.result = -EBADF;  // a closed, moved-from or default-constructed socket: no state to look up
    return nullptr;
  }
  if (closed_since_opened(op)) {
    op.result = -ECANCELED;  // made before its socket's close: the number names another socket, or none
    return nullptr;
  }
  if (int error = ensure_reactor(); error != 0) {
    if (io_slot* sibling = stand_in(op)) {
      return sibling;
    }
    op.result = error;
    return nullptr;
  }
  if (op.source == nullptr) {
    return this;
  }
  if (io_source* source = op.source->load(std::memory_order_acquire); source != nullptr && home_of(*source) == this) {
    return this;  // homed here: served from its state, or single-shot on its registered file
  }
  if (!reactor_->serves_from_source(op)) {
    op.source = nullptr;  // homed elsewhere, or none: its state is read on its home's thread only
    return this;
  }
  io_slot* home = claim_home(*op.source, op.kind, {op.fd, op.generation, op.record}, *this);
  if (home == this) {
    return this;
  }
  if (home != nullptr && !exclusive_ && shares_executor_with(*home)) {
    return home;
  }
  if (home == nullptr || exclusive_ || reactor_->keeps_multishot(op)) {
    // Its home is shutting down; or another executor keeps it, and either runs every task here (an
    // event loop, a one-worker runtime: nowhere to hand the op to) or holds a multishot request on it
    // that would take what a single-shot op here waits for (a read from a two-worker runtime hung).
    op.result = home == nullptr ? -ECANCELED : -EXDEV;
    return nullptr;
  }
  op.source = nullptr;  // another executor's socket, no multishot at its home: single-shot here
  return this;
}

io_slot* io_slot::stand_in(io_op& op) noexcept {
  if (exclusive_ || shut_down_) {
    return nullptr;
  }
  if (op.source != nullptr) {
    if (io_source* source = op.source->load(std::memory_order_acquire); source != nullptr) {
      io_slot* home = home_of(*source);
      return home != nullptr && home != this && shares_executor_with(*home) ? home : nullptr;
    }
    op.source = nullptr;  // no state anywhere: single-shot at the sibling, on the descriptor
  }
  for (io_slot* sibling : siblings_) {
    if (sibling != this && sibling->backend() != io_backend::automatic) {
      return sibling;
    }
  }
  return nullptr;
}

bool io_slot::link_deadline(io_op& op, std::chrono::steady_clock::time_point deadline) {
  if (shut_down_ || ensure_reactor() != 0) {
    return false;  // out of descriptors: submit() hands the op to a sibling (stand_in) or fails it
  }
  // Asked before routing: an op a multishot state would serve takes the timer path anyway, and only
  // its submit() may create that state (submitted at once, so no state is left without a reactor).
  if (!reactor_->can_link_deadline(op) || route(op) != this) {
    return false;
  }
  // steady_clock counts CLOCK_MONOTONIC (libstdc++ on Linux), the clock the kernel's timeouts use.
  std::int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch()).count();
  ns = ns > 0 ? ns : 0;
  op.deadline = {.tv_sec = ns / 1'000'000'000, .tv_nsec = ns % 1'000'000'000};
  op.link_deadline = true;
  return true;
}

std::uint32_t io_slot::reactor_id() const noexcept { return reactor_ != nullptr ? reactor_->id() : 0; }

std::uint64_t io_slot::linked_timeouts() const noexcept {
  return reactor_ != nullptr ? reactor_->linked_timeouts() : 0;
}

std::uint64_t io_slot::multishot_completions() const noexcept {
  return reactor_ != nullptr ? reactor_->multishot_completions() : 0;
}

std::size_t io_slot::registered_files() const noexcept {
  return reactor_ != nullptr ? reactor_->registered_files() : 0;
}

void io_slot::request_cancel(io_op& op) noexcept {
  io_state expected = io_state::in_flight;
  for (;;) {
    if (expected == io_state::in_flight &&
        op.state.compare_exchange_weak(expected, io_state::cancel_requested, std::memory_order_acq_rel)) {
      break;
    }
    if (expected == io_state::queued &&
        op.state.compare_exchange_weak(expected, io_state::cancel_queued, std::memory_order_acq_rel)) {
      return;  // handed off and not taken yet: the home slot finishes it when it takes it
    }
    if (expected != io_state::in_flight && expected != io_state::queued) {
      return;  // finished (or shut down) first: nothing to cancel, and the op may be gone any moment
    }
  }
  // Seq_cst push, then the parker's seq_cst load of its state: against the owner's seq_cst `parked`
  // store and its seq_cst exchange of the queue in drain_cancel_requests(), either the owner sees the
  // request before it sleeps or this wakes it (the parker.hpp Dekker pair).
  io_op* head = cancels_.load(std::memory_order_relaxed);
  do {
    op.next_cancel = head;
  } while (!cancels_.compare_exchange_weak(head, &op, std::memory_order_seq_cst, std::memory_order_relaxed));
  parker_.unpark_if_parked();
}

void io_slot::drain_cancel_requests() noexcept {
  io_op* request = cancels_.exchange(nullptr, std::memory_order_seq_cst);
  while (request != nullptr) {
    io_op& op = *request;
    request = op.next_cancel;  // read before the op can be scheduled (and its frame freed)
    if (op.state.load(std::memory_order_acquire) == io_state::done) {
      deliver(op);  // it finished while its cancel request was on the way: deferred until now
    } else {
      op.state.store(io_state::cancel_issued, std::memory_order_relaxed);
      reactor_->cancel(op);
    }
  }
}

void io_slot::deliver(io_op& op) noexcept {
  batch_[batch_size_++] = op.handle;
  if (batch_size_ == batch_capacity) {
    flush();
  }
}

void io_slot::flush() noexcept {
  if (batch_size_ != 0) {
    undrained_ += batch_size_;
    owner_.schedule_batch({batch_, batch_size_});
    batch_size_ = 0;
  }
}

void io_slot::turn(std::optional<std::chrono::nanoseconds> timeout, std::size_t limit) noexcept {
  ++turns_;
  drain_handed_off();
  drain_releases();
  drain_cancel_requests();
  reactor_->reap({[](void* context, io_op& op) noexcept {
                    auto& self = *static_cast<io_slot*>(context);
                    --self.pending_;
                    if (op.state.exchange(io_state::done, std::memory_order_acq_rel) != io_state::cancel_requested) {
                      self.deliver(op);
                    }  // else: its cancel request is still queued; drain_cancel_requests delivers it
                  },
                  this},
                 timeout, std::min(limit, reap_limit_));
  drain_releases();
  drain_cancel_requests();
  flush();
}

void io_slot::park(std::optional<std::chrono::nanoseconds> timeout) noexcept {
  if (cancels_.load(std::memory_order_seq_cst) != nullptr || handed_.load(std::memory_order_seq_cst) != nullptr ||
      releases_.load(std::memory_order_seq_cst) != nullptr) {
    timeout = std::chrono::nanoseconds::zero();  // a cancel request, a hand-off or a release arrived: act on it
  }
  turn(timeout, reap_limit_);
}

void io_slot::wake() noexcept { reactor_->wake(); }

void io_slot::forget(int fd) noexcept {
  if (reactor_ != nullptr) {
    reactor_->forget(fd);
  }
}

void io_slot::shutdown() noexcept {
  if (shut_down_) {
    return;
  }
  shut_down_ = true;
  io_op* handed = handed_.exchange(closed_marker(), std::memory_order_seq_cst);  // 1 (hand-offs)
  while (handed != nullptr) {  // never taken: marked done like the ops in flight (3)
    io_op& op = *std::exchange(handed, handed->next);
    unpin_source(op);
    op.result = -ECANCELED;
    op.state.store(io_state::done, std::memory_order_release);
  }
  io_source* released = releases_.exchange(closed_release_marker(), std::memory_order_seq_cst);  // 1 (releases)
  if (reactor_ == nullptr) {
    return;  // no reactor: no source is homed here, so none was queued
  }
  release_each(released);
  parker_.set_backend(nullptr);                                                   // 4 (the parker part)
  cancels_.exchange(nullptr, std::memory_order_seq_cst);                          // 1
  reactor_->cancel_all_and_reap({[](void* context, io_op& op) noexcept {          // 2
                                   --static_cast<io_slot*>(context)->pending_;
                                   op.state.store(io_state::done, std::memory_order_release);  // 3
                                 },
                                 this});
  batch_size_ = 0;  // handles collected but never scheduled belong to frames destroyed next
}

void request_io_cancel(io_op& op) noexcept { op.slot->request_cancel(op); }

bool io_awaiter::finish_at_once(std::coroutine_handle<> self, stop_state* stop) {
  stop_ = stop;
  if (stop != nullptr && stop->stop_requested()) {
    op_.result = -ECANCELED;
  }
  return yield_if_budget_spent(self);
}

bool io_awaiter::start(std::coroutine_handle<> self, stop_state* stop) {
  if (stop != nullptr && stop->stop_requested()) {
    return finish_at_once(self, stop);  // cancelled without suspending still spends the budget
  }
  stop_ = stop;
  if (op_.kind == io_kind::recv && op_.fd >= 0 && (op_.length == 0 || (stash_ != nullptr && !stash_->empty()))) {
    // Nothing to wait for: an empty buffer reads nothing; bytes a cancelled read left come first.
    std::span<std::byte> into(static_cast<std::byte*>(op_.buffer), op_.length);
    op_.result = into.empty() ? 0 : static_cast<std::int32_t>(stash_->take(into));
    return yield_if_budget_spent(self);
  }
  if (op_.kind == io_kind::recvmsg && op_.fd >= 0 && datagram_waiter_ != nullptr && !datagram_waiter_->stash->empty() &&
      !closed_since_opened(op_)) {  // a receive made before its socket's close gets no kept datagram
    if (std::optional<datagram_stash::kept> kept = datagram_waiter_->stash->take()) {
      op_.result = receive_kept(*static_cast<msghdr*>(op_.buffer), *kept);  // a datagram a cancelled receive took
      served_kept_ = true;
      return yield_if_budget_spent(self);
    }
  }
  if (int kept = op_.kind == io_kind::accept && accept_waiter_ != nullptr ? accept_waiter_->stash->take() : -1;
      kept >= 0) {
    op_.result = kept;  // a connection an accept took for a cancelled task comes first
    return yield_if_budget_spent(self);
  }
  io_slot* slot = current_io_slot;
  if (slot == nullptr) {
    throw std::logic_error(std::string(what_) + ": no event loop or runtime runs on this thread");
  }
  op_.handle = self;
  switch (slot->submit(op_, *this)) {
    case io_slot::submitted::finished:
      return yield_if_budget_spent(self);  // finished without suspending: it still spends the budget
    case io_slot::submitted::handed_off:
      return true;  // the home slot's thread owns op_ now, and may already have resumed us
    case io_slot::submitted::in_flight:
      break;
  }
  arm_cancellation();  // may run at once, here: the slot then cancels it
  return true;  // from here the reactor's thread resumes us; it is this thread, so op_ stays ours
}

bool io_awaiter::offer_deadline(std::chrono::steady_clock::time_point deadline) {
  io_slot* slot = current_io_slot;
  return slot != nullptr && slot->link_deadline(op_, deadline);
}

bool io_awaiter::linked_deadline_passed() const noexcept {
  if (linked_deadline_reading_ == 0) {
    // One reading of the clock for the awaiter's life: with_timeout's question (deadline_expired) and
    // check() must agree, or a deadline passing between two readings turned a timeout into a plain
    // cancellation. The clock link_deadline() took the deadline from (steady_clock, the linked
    // timeout's CLOCK_MONOTONIC).
    auto deadline = std::chrono::seconds(op_.deadline.tv_sec) + std::chrono::nanoseconds(op_.deadline.tv_nsec);
    linked_deadline_reading_ = std::chrono::steady_clock::now().time_since_epoch() >= deadline ? 2 : 1;
  }
  return linked_deadline_reading_ == 2;
}

bool io_awaiter::deadline_expired() const noexcept { return !stop_requested() && deadline_cancelled(); }

void io_awaiter::cancel_for_deadline() noexcept {
  deadline_cancel_ = true;
  if (op_.slot != nullptr) {  // null: never submitted (its task was cancelled before it started)
    request_io_cancel(op_);
  }
}

void io_awaiter::keep_when_cancelled(accept_stash& stash, accept_waiter& waiter) noexcept {
  accept_waiter_ = &waiter;
  waiter.stash = &stash;
  waiter.op = &op_;
}

void io_awaiter::wait_for_kept_connection() noexcept { accept_waiter_->stash->wait(*accept_waiter_); }

void io_awaiter::keep_when_cancelled(datagram_stash& stash, datagram_waiter& waiter) noexcept {
  datagram_waiter_ = &waiter;
  waiter.stash = &stash;
  waiter.op = &op_;
}

void io_awaiter::wait_for_kept_datagram() noexcept { datagram_waiter_->stash->wait(*datagram_waiter_); }

void io_awaiter::settle_datagram(const socket_id& socket) {
  std::optional<datagram_stash::kept> handed = datagram_waiter_->stash->stop_waiting(*datagram_waiter_);
  if (stop_requested()) {
    // Its task is being cancelled: the socket keeps the datagrams it holds, and this one ends
    // cancelled. Past its own deadline it returns its own.
    give_back_datagrams(socket, handed, op_.result >= 0);
    if (op_.result >= 0) {
      op_.result = -ECANCELED;
    }
  } else if (handed) {
    if (op_.result == -ECANCELED) {
      // The cancel the hand-off made (or a deadline, or a close) ended it: it returns what it was handed.
      op_.result = receive_kept(*static_cast<msghdr*>(op_.buffer), *handed);
    } else {
      give_back_datagrams(socket, handed, false);  // it got its own first, or failed on its own
    }
  }
}

void io_awaiter::give_back_datagrams(const socket_id& socket, std::optional<datagram_stash::kept>& handed, bool own) {
  datagram_stash& stash = *datagram_waiter_->stash;
  keep_while_open(socket, [&] {
    if (handed) {
      stash.keep(std::move(*handed), true);  // handed out as the oldest
    }
    if (own) {
      stash.keep(kept_from(*static_cast<const msghdr*>(op_.buffer), static_cast<std::size_t>(op_.result)),
                       served_kept_);
    }
  });
}

void io_awaiter::leave_datagrams(bool resumed) noexcept {
  if (datagram_waiter_ == nullptr) {
    return;  // never awaited
  }
  std::optional<datagram_stash::kept> handed = datagram_waiter_->stash->stop_waiting(*datagram_waiter_);
  // Completed, or served from the stash, but never resumed to take it: its executor shut down first.
  const bool unclaimed =
      !resumed && op_.result >= 0 && (served_kept_ || op_.state.load(std::memory_order_acquire) == io_state::done);
  if (!handed && !unclaimed) {
    return;
  }
  try {
    give_back_datagrams({op_.fd, op_.generation, op_.record}, handed, unclaimed);
  } catch (const std::bad_alloc&) {
    // Out of memory: the datagrams cannot be kept, and go with the frame that held them.
  }
}

void io_awaiter::settle_accept() noexcept {
  accept_stash& stash = *accept_waiter_->stash;
  int handed = stash.stop_waiting(*accept_waiter_);
  if (op_.result == -ECANCELED) {
    if (int pending = stash.take_pending(op_.fd); pending >= 0) {
      op_.result = pending;  // the kernel woke this accept for it, then cancelled it (accept_stash.hpp)
    }
  }
  if (stop_ != nullptr && stop_->stop_requested()) {
    // Its task is being cancelled: the connections it holds stay with the listener, and this accept
    // ends cancelled. Its own deadline does not count: with_timeout then returns the connection, and
    // the task goes on with it.
    if (op_.result >= 0) {
      stash.keep(std::exchange(op_.result, -ECANCELED));
    }
    if (handed >= 0) {
      stash.keep(handed);
    }
  } else if (handed >= 0) {
    if (op_.result >= 0) {
      stash.keep(handed);  // the kernel gave it a connection before the hand-off's cancel: the next waiter's
    } else {
      op_.result = handed;  // the cancel the hand-off made (or the deadline, or a close) ended it
    }
  }
}

bool io_awaiter::settle() {
  // The socket's stash is written only while the socket is open (keep_while_open): one destroyed
  // under this operation took its stash with it, and its bytes are dropped.
  const socket_id socket{op_.fd, op_.generation, op_.record};
  if (op_.result > 0 && stash_ != nullptr && stop_requested()) {
    // A read that completed with data for a task being cancelled: the stream keeps the bytes for its
    // next read, and this one ends cancelled (read_stash.hpp). Past its own deadline it returns them.
    give_back_read(socket, stash_, {static_cast<const std::byte*>(op_.buffer), static_cast<std::size_t>(op_.result)});
    op_.result = -ECANCELED;
  }
  if (datagram_waiter_ != nullptr) {
    settle_datagram(socket);
  }
  if (accept_waiter_ != nullptr) {
    settle_accept();
  }
  if (op_.result >= 0) {
    return succeeded();
  }
  int error = -op_.result;
  // route() refuses an op with EXDEV when the socket's io_uring state lives in another loop.
  std::error_code code = error == EXDEV ? make_error_code(net::errc::served_by_another_reactor)
                                        : std::error_code(error, std::system_category());
  // A deadline that cancelled the op (deadline_cancelled(): it ended cancelled after its timer fired
  // or its linked timeout's time came) is a timeout: with_timeout turns that into corio::timed_out,
  // or, in the error_code form, the op stores errc::timed_out and with_timeout returns what it yields
  // (the bytes a whole write sent before the deadline). One that failed on its own reports its own
  // error. A stop requested on the task counts first, whatever error the op ended with: a reset or a
  // closed socket that arrives with a cancellation is usually its consequence (a cancelled task's
  // stream closed under a peer's pending read), not news for a task that is being cancelled anyway.
  // A stop that a deadline requested (with_timeout around a task: its timer stops the task's state)
  // is a timeout too.
  bool stopped = stop_requested();
  bool timed_out = stopped ? stop_->stopped_by_deadline() : deadline_cancelled();
  bool cancelled_here = stopped || timed_out;
  if (error_ != nullptr) {
    if (cancelled_here) {
      *error_ = std::make_error_code(timed_out ? std::errc::timed_out : std::errc::operation_canceled);
    } else {
      *error_ = code;
    }
    return false;
  }
  if (cancelled_here) {
    throw cancelled();
  }
  throw std::system_error(code, what_);
}

void io_awaiter::abandoned_in_flight() noexcept {
  std::fputs("corio: an I/O operation's frame was destroyed while the kernel still owned it "
             "(its executor must cancel and reap it first)\n",
             stderr);
  std::abort();
}

}  // namespace detail
}  // namespace corio
