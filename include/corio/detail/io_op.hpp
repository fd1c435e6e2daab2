#pragma once
// One I/O operation in flight, and the awaiter every socket operation is built from.
//
// Design note.
// Purpose: an awaitable builds an `io_op` in its own frame (what to do, the suspended handle, a
//   result slot) and hands it to the reactor of the thread it runs on (io_slot.hpp). The reactor
//   finishes it (io_uring: `user_data` is the op's address, no look-up, or the op waits on its
//   socket's io_source for the socket's multishot accept/recv, io_source.hpp; epoll: the op waits in
//   its fd's list) and the slot schedules the handle on the executor it was submitted from. No
//   allocation per operation. "The kernel holds the op" below includes waiting on an io_source:
//   cancel then unlinks it there (no kernel request names the op or its buffer).
// The op's state, one atomic byte, decides the race between a completion (always on the reactor's
//   thread) and a cancellation (a stop callback, on any thread):
//     idle --submit--> in_flight --completion--> done                      (the slot schedules)
//     in_flight --stop callback (CAS)--> cancel_requested                  (callback queues the op
//                                                                           on its slot, wakes it)
//     cancel_requested --slot drains its queue--> cancel_issued            (reactor asked to cancel:
//                                                                           ASYNC_CANCEL / unlink)
//     cancel_issued --completion (the original op's CQE)--> done           (the slot schedules)
//     cancel_requested --completion--> done, *not* scheduled yet: the op is still on (or about to be
//                                      pushed onto) the slot's cancel queue; the slot schedules it when
//                                      it pops it there and finds it done.
//   An op handed to another worker's slot (a read on a stream whose multishot state that
//   worker's reactor keeps: io_slot.hpp, "Multishot") starts one step earlier:
//     idle --hand-off--> queued --the home slot takes it (CAS)--> in_flight    (then as above)
//     queued --deadline (CAS)--> cancel_queued --the home slot takes it--> done
//                                                                           (-ECANCELED, scheduled)
//   The stop callback of a handed-off op is registered by the home slot's thread when it takes the op
//   (arm_cancellation): the submitting thread touches nothing once the op is published, since the
//   home thread may finish it and resume the coroutine at once.
// Invariants:
//  - only the reactor's thread moves the state out of in_flight to done, and out of cancel_requested,
//    queued and cancel_queued; a stop callback only moves in_flight -> cancel_requested, and a
//    deadline's cancel (cancel_for_deadline) that one or queued -> cancel_queued (CAS, so each loses
//    cleanly to a completion or to the home slot taking the op).
//    The handle is scheduled exactly once, after both the kernel and any cancel request
//    have let go of the op: the frame may be freed as soon as it resumes.
//  - a stop callback that lost (state not in_flight) touches nothing but the state byte; one that won
//    touches the op and its slot until it returns, and ~stop_callback in the resumed awaiter waits for
//    it, so the frame outlives it.
//  - the kernel never holds an op whose frame is gone: frames suspended on I/O are destroyed only by
//    an executor's shutdown, after its slots cancelled and reaped every op (io_slot.hpp, shutdown).
//    The awaiter's destructor checks this and aborts loudly rather than free memory the kernel owns.
// Memory order: the op's fields are written by the submitting (= reactor) thread before the stop
//   callback is registered (registration publishes them to the callback); a handed-off op's fields
//   reach its home thread through the hand-off queue (seq_cst push, seq_cst exchange). The callback's
//   CAS is acq_rel; it pushes the op on the slot's queue with a release CAS, which the reactor
//   thread's acquire exchange pairs with. The result reaches the resumed coroutine through
//   executor::schedule.
// Whole transfers (write_all): the reactor, not the task, loops over short sends (advance_whole): a
//   write that needs several syscalls still resumes its task once and costs no coroutine frame. It
//   re-issues the op only while the state is in_flight (and not during shutdown); a cancel request
//   that arrives after that re-issue targets the new request, which has the same address as user_data.
//   Stopped part-way, the op is reported with a non-negative result and transferred < whole_size,
//   which the awaiter turns into the cancellation.
// Linked deadlines (with_timeout around an op, timeout_awaiter.hpp): before starting the op, the
//   timeout awaiter offers it the deadline (offer_deadline). The op's slot takes it only when its
//   reactor will issue the op as one plain SQE (io_uring, not a stream's read or an accept): then the deadline rides
//   with the op in the kernel (IORING_OP_LINK_TIMEOUT, uring_reactor.cpp) and no timer is armed. The
//   answer is final and given before anything is armed or submitted (by construction: offer and
//   submit run back to back on the submitting thread); a refused deadline leaves the op as submit()
//   would see it anyway, and the awaiter arms its timer as before. A taken deadline that fires completes the op
//   with -ECANCELED while nobody requested a cancel: the state machine above does not change (it is a
//   completion like any other), and the awaiter reads it as its deadline (deadline_expired) if the
//   deadline's time has come (-ECANCELED before it has is another cancel, e.g. its socket closed). A stop
//   requested on the op's token (the outer task's cancellation, forwarded) counts first: the op was
//   cancelled, not timed out, whichever of the two the kernel acted on.
//   The timeout request itself never points into the frame once submitted (the kernel copies the
//   timespec when it prepares the SQE), so "the kernel never holds an op whose frame is gone" (above)
//   needs only the op's own completion.
// Deadlines on the timer path (with_timeout around an op whose slot refused the deadline: a stream's
//   reads and a listener's accepts, epoll): the timer's callback runs on the thread that armed it (the op's
//   reactor thread, or the thread that handed the op off) and calls cancel_for_deadline(): the same
//   request_io_cancel a stop callback makes, and a flag that check() reads like link_deadline. It
//   needs no stop state, no forwarding callback and no token swap in with_timeout, and the op's own
//   stop callback stays on the task's state. On either path the deadline counts only if the op ended
//   cancelled: one the kernel completed first (bytes, a datagram, a connection, its own error) returns
//   that (deadline_cancelled). The flag is written before the timer's callback returns
//   and read after the awaiter's disarm, which waits for that callback (timer_queue.hpp), so the two
//   never race.
// Layout: an echo server at hundreds of busy connections finds none of a connection's lines in the
//   core's first-level cache when its read completes, so every cache line an operation touches is a
//   miss, and what a plain read or write touches is packed together: the awaiter's stop callback,
//   token, error slot, stash, name and claim, then the request and the op's hot fields; the fields of
//   cancellation, deadlines and hand-offs follow, some without initializers (each written before it is
//   read), and the accept and UDP receive fields come last, read only for those kinds. With the
//   io_uring source's hot line (src/io/io_source_state.hpp) this took an echo at 500 connections from
//   54 to 46 first-level data misses on io_uring and from 24.4 to 22-23.8 on epoll (callgrind's cache
//   model, which does not see the kernel's side).
// Rejected: a per-reactor map from ids to ops (a look-up per completion, and still a lifetime problem);
//   letting the stop callback touch the ring itself (io_uring's submission queue is single-producer,
//   and SINGLE_ISSUER makes a second submitter an error); resuming with corio::cancelled at once on
//   stop and leaving the kernel op behind (the kernel would write into a freed frame).
#include <linux/time_types.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <system_error>

#include <corio/detail/coop_budget.hpp>
#include <corio/detail/executor.hpp>
#include <corio/detail/promise_base.hpp>
#include <corio/detail/read_stash.hpp>
#include <corio/detail/stop_state.hpp>

namespace corio::detail {

class accept_stash;
class datagram_stash;
struct accept_waiter;
struct datagram_waiter;
struct kept_datagram;
struct fd_record;
class io_slot;
struct io_source;

enum class io_kind : std::uint8_t { recv, send, accept, connect, recvmsg, sendmsg };

enum class io_state : std::uint8_t { idle, queued, cancel_queued, in_flight, cancel_requested, cancel_issued, done };

class io_awaiter;

/// The most one send or receive asks for: Linux's per-call limit (MAX_RW_COUNT, 2 GiB less a page).
/// io_uring refuses a longer one with EINVAL where read(2) and send(2) would transfer part of it;
/// asking for no more keeps both backends the same (a whole transfer issues the rest next).
inline constexpr std::uint32_t max_transfer = 0x7ffff000;
constexpr std::uint32_t clamp_transfer(std::size_t size) noexcept {
  return size > max_transfer ? max_transfer : static_cast<std::uint32_t>(size);
}

/// A socket as its operations name it: the descriptor number, and the generation the number had when
/// the socket was opened (src/io/fd_records.hpp, "Threads"), so that an operation made before the
/// socket's close and started after it ends cancelled, whatever the number names by then.
struct socket_id {
  int fd = -1;
  std::uint32_t generation = 0;
  /// The number's process-wide record (src/io/fd_records.hpp), found once when the socket is opened;
  /// null if memory ran out then.
  fd_record* record = nullptr;
};

/// Runs `keep` (a store into an object of the socket's, such as its read stash) unless the socket was
/// closed since `socket` was taken: then the object may be gone with it (a stream destroyed under its
/// read, a misuse that must still not write into freed memory), and nothing could read what `keep`
/// would store. The check and `keep` are one step for a close on another thread, which waits for it
/// (src/io/fd_records.hpp, "Calls"), so keep must be short and must not block. Propagates what `keep`
/// throws.
template <class Keep>
void keep_while_open(const socket_id& socket, Keep&& keep);

/// Gives `bytes` a read of `socket` took back to the front of its stream's `stash` (read_stash.hpp),
/// for the stream's next read: through keep_while_open, so not once the socket was closed. No stash:
/// the stream has no socket, and read nothing. Throws std::bad_alloc.
void give_back_read(const socket_id& socket, read_stash* stash, std::span<const std::byte> bytes);

/// What the kernel is asked to do. Trivially copyable, so an awaiter can be moved before it starts.
struct io_request {
  io_kind kind = io_kind::recv;
  int fd = -1;
  /// recv/send: the byte count; connect: the address length.
  std::uint32_t length = 0;
  /// socket_id::generation of the socket `fd` names.
  std::uint32_t generation = 0;
  /// recv/send: the bytes; accept/connect: a sockaddr; recvmsg/sendmsg: a msghdr.
  void* buffer = nullptr;
  /// socket_id::record: the number's record, so no operation looks it up.
  fd_record* record = nullptr;
  /// recv/accept on a stream or listener: the socket's pointer to its multishot state (io_source.hpp),
  /// which the io_uring backend creates on first use and serves later operations from; send on a
  /// stream: the same state, whose registered file the send uses if it has one; null: a plain
  /// single-shot op.
  std::atomic<io_source*>* source = nullptr;
  /// send only, non-zero for a whole transfer (write_all): the full byte count. The reactor issues the
  /// op again for the rest after each short send, so the task resumes once, when all of it is sent,
  /// on an error, or on a cancellation (see io_op::advance_whole).
  std::size_t whole_size = 0;
  /// accept: in, the size of *buffer; out, the peer address length.
  socklen_t* address_length = nullptr;
};

struct io_op : io_request {
  // Hot: what submitting, completing and resuming a plain read or write touch (see "Layout").
  std::int32_t result = 0;  // >= 0 on success, else -errno; valid once done
  std::atomic<io_state> state{io_state::idle};
  /// io_uring: the CQE of the op's request itself has arrived (its cancellers' may still be due).
  bool answered = false;
  /// io_uring: CQEs still due for the op's request, one more for its linked timeout and for each
  /// ASYNC_CANCEL sent for it (the op waits for all of them).
  std::uint8_t cqes_due = 0;
  /// Set by io_slot::link_deadline (the slot took a deadline for this op): every SQE issued for the op,
  /// re-issues of a whole transfer included, carries a linked timeout at `deadline`, an absolute
  /// CLOCK_MONOTONIC time (std::chrono::steady_clock's epoch), read by the kernel at submission.
  bool link_deadline = false;
  // epoll connect only: connect() was issued, now waiting for writability. Cold, but here, in the
  // flags' padding, its initializer writes no line a plain op would not write anyway.
  bool started = false;
  std::coroutine_handle<> handle;
  io_slot* slot = nullptr;
  io_op* next = nullptr;  // the backend's lists (epoll: the fd's waiters), or a slot's hand-off queue
  io_source* held_on = nullptr;    // io_uring: the source whose socket this op's request in the kernel uses
  io_source* parked_on = nullptr;  // io_uring: the source whose queue of waiting ops holds this op
  std::size_t transferred = 0;     // whole transfers: bytes sent so far, the last completion's included
  // Cold: cancellation, deadlines and hand-offs only. Those without an initializer are written before
  // anything reads them (request_cancel, link_deadline, hand_off), so a plain op never touches them.
  io_op* next_cancel;  // the slot's queue of cancel requests
  __kernel_timespec deadline;
  io_awaiter* awaiter;  // set by io_slot::hand_off: registers the op's stop callback when a home slot takes it
  /// An op handed to its socket's home slot by another worker (io_slot::hand_off): the socket's
  /// io_source, pinned (one more owner, io_source.hpp "Lifetime") until the home took the op; `source`
  /// then points here, not into the socket object, which may be destroyed while the op waits.
  std::atomic<io_source*> pinned{nullptr};

  /// Reactor thread, after a whole transfer's syscall or completion returned `result`: counts the
  /// bytes and, if some remain, points the request at them and returns true (issue it again, unless
  /// it is being cancelled: then it is reported with what it sent). False for any other op.
  bool advance_whole(std::int32_t result) noexcept {
    if (whole_size == 0 || result <= 0) {
      return false;
    }
    transferred += static_cast<std::size_t>(result);
    if (transferred >= whole_size) {
      return false;
    }
    buffer = static_cast<std::byte*>(buffer) + result;
    std::size_t rest = whole_size - transferred;
    length = clamp_transfer(rest);
    return true;
  }
};

/// A stream's one-reader and one-writer rules, checked: an operation holds its direction's flag
/// while it is in flight, and a second one started meanwhile in the same direction (another task's,
/// or a when_any branch's) throws std::logic_error instead of interleaving its bytes with the first's,
/// or taking bytes meant for the first. Go serialises concurrent operations on a connection and
/// tokio's `&mut self` rules them out; a silent mix of two messages, or bytes handed to whichever
/// read came first, is the one outcome neither allows.
/// Where the flags live: in the process-wide record of the socket's descriptor number
/// (src/io/fd_records.hpp), which is never freed, not in the stream object. An operation resumes
/// after its stream was closed under it (supported) or destroyed under it (a misuse, but one that
/// must not corrupt memory), and lets go of its flag then: in the stream, that was a store into
/// freed memory. A flag holds the generation of the socket whose operation holds it (plus one, so
/// that 0 is free), so an operation on the number's next socket is never refused for the old one's,
/// and a late release changes nothing once the number moved on (a CAS on its own value). Atomic, so
/// it is exact across workers.
class exclusive_claim {
 public:
  exclusive_claim() noexcept = default;
  exclusive_claim(exclusive_claim&&) noexcept {}  // before it starts
  exclusive_claim& operator=(exclusive_claim&&) = delete;
  ~exclusive_claim() { release(); }

  /// Takes the flag of `op`'s direction on its socket, or throws std::logic_error naming `what` if
  /// another operation holds it. `op` stays put until release() (the awaiter's own op).
  void claim(const io_request& op, const char* what) {
    if (op.record != nullptr && op.fd >= 0) {
      take_direction(op, what);
      held_ = &op;
    }
  }
  void release() noexcept {
    if (held_ != nullptr) {
      release_direction(*held_);
      held_ = nullptr;
    }
  }

 private:
  static void take_direction(const io_request& op, const char* what);
  static void release_direction(const io_request& op) noexcept;

  const io_request* held_ = nullptr;
};

/// Any thread: a stop callback asks the op's slot to cancel it (see the state diagram above).
void request_io_cancel(io_op& op) noexcept;

/// The awaiter of one socket operation. Derived awaiters fill `op_` and call start() from
/// await_suspend, and turn the result into a value in await_resume through check().
class io_awaiter {
 public:
  io_awaiter(const char* what, std::error_code* error) noexcept : error_(error), what_(what) {}
  /// Only before it is awaited (when_any and with_timeout take operations by value).
  io_awaiter(io_awaiter&& other) noexcept : error_(other.error_), stash_(other.stash_), what_(other.what_) {
    static_cast<io_request&>(op_) = other.op_;
  }
  io_awaiter& operator=(io_awaiter&&) = delete;
  ~io_awaiter() {
    io_state state = op_.state.load(std::memory_order_acquire);
    if (state != io_state::idle && state != io_state::done) {
      abandoned_in_flight();
    }
    claim_.release();  // here, while op_ (which it names) lives: members declared after it go first
  }

  bool await_ready() const noexcept { return false; }

  /// with_timeout's hook, on the awaiting thread before await_suspend: asks this thread's reactor to
  /// carry `deadline` with the operation (a linked timeout). True: it will, and the caller arms no
  /// timer of its own; false: nothing changed. Throws std::system_error if the reactor cannot be created.
  bool offer_deadline(std::chrono::steady_clock::time_point deadline);
  /// After resumption: whether a deadline taken by offer_deadline, or one that called
  /// cancel_for_deadline, ended the operation (it completed cancelled, and no stop was requested on
  /// its token).
  bool deadline_expired() const noexcept;
  /// with_timeout's timer, on the thread that armed it (this op's reactor thread), while the awaiting
  /// coroutine is suspended here: cancels the operation as a stop request would, without with_timeout
  /// having to give the operand a stop token of its own (see "Deadlines on the timer path" above).
  void cancel_for_deadline() noexcept;

 protected:
  /// The operation's socket (derived awaiters' constructors).
  void target(socket_id socket) noexcept {
    op_.fd = socket.fd;
    op_.generation = socket.generation;
    op_.record = socket.record;
  }

  template <class Promise>
  bool start(std::coroutine_handle<Promise> self) {
    return start(self, stop_token_of(self));
  }
  /// For an operation with nothing to submit, its result already in op_ (an empty whole write, a
  /// connect whose socket() failed): still a cancellation point (-ECANCELED once a stop was
  /// requested) and still spends the cooperative budget, as every await that does not suspend must,
  /// or a loop on it would starve its thread and never see its cancellation.
  template <class Promise>
  bool finish_at_once(std::coroutine_handle<Promise> self) {
    return finish_at_once(self, stop_token_of(self));
  }
  bool finish_at_once(std::coroutine_handle<> self, stop_state* stop);
  /// Submits op_ on this thread's reactor. Returns whether the coroutine stays suspended; false means
  /// the result is ready now. Throws std::logic_error on a thread with no event loop or runtime.
  bool start(std::coroutine_handle<> self, stop_state* stop);
  /// A stream's read or write: takes its direction's flag (exclusive_claim), then start(), letting go
  /// of the flag if that throws. check_claimed() lets go of it after resumption.
  template <class Promise>
  bool start_claimed(std::coroutine_handle<Promise> self) {
    claim_.claim(op_, what_);
    try {
      return start(self);
    } catch (...) {
      claim_.release();
      throw;
    }
  }

 public:
  /// The thread that owns op_ now (the submitting thread, or the home slot's when it takes a handed-off
  /// op): registers the stop callback on the task's stop state; it may run at once.
  void arm_cancellation() noexcept {
    if (op_.kind == io_kind::accept && accept_waiter_ != nullptr) [[unlikely]] {
      wait_for_kept_connection();
    }
    if (op_.kind == io_kind::recvmsg && datagram_waiter_ != nullptr) [[unlikely]] {
      wait_for_kept_datagram();
    }
    if (stop_ != nullptr && stop_->stop_possible()) {
      stop_callback_.emplace(*stop_, on_stop{&op_});
    }
  }

 protected:

  /// After resumption: true if the operation succeeded (op_.result >= 0). Otherwise throws
  /// corio::cancelled (the task was cancelled, or its deadline ended it: deadline_cancelled) or
  /// std::system_error naming the operation, or, in the error_code form, stores the error and
  /// returns false. A stream read given a stash (keep_when_cancelled) that completed with data while
  /// a stop was requested keeps the data there and counts as cancelled (read_stash.hpp); so does a
  /// UDP receive with its datagram (datagram_stash.hpp), and an accept that completed with a
  /// connection while its task's stop was requested (accept_stash.hpp). Past its own deadline, an op
  /// that completed returns what it got.
  bool check() {
    stop_callback_.reset();  // waits for a callback running on another thread
    if (op_.result >= 0 && op_.kind != io_kind::accept && op_.kind != io_kind::recvmsg &&
        (op_.result == 0 || stash_ == nullptr || !stop_requested())) {
      return succeeded();  // the usual case, inline; the rest (accepts and receives too) in settle()
    }
    return settle();
  }
  /// check() for an op started with start_claimed().
  bool check_claimed() {
    claim_.release();
    return check();
  }

  /// A stream read: bytes it completes with while being cancelled go to `stash`.
  void keep_when_cancelled(read_stash* stash) noexcept { stash_ = stash; }
  /// A UDP receive (from await_suspend, where the awaiter stays put): takes a datagram kept in `stash`
  /// first, is woken for one kept while it waits (listed through `waiter`), and leaves there the one
  /// it completes with while being cancelled, whole with its sender (datagram_stash.hpp).
  void keep_when_cancelled(datagram_stash& stash, datagram_waiter& waiter) noexcept;
  /// That UDP receive's awaiter is destroyed (`resumed`: after await_resume): unlists it, and leaves in
  /// the stash a datagram handed to it, and the one it completed with if its frame goes unresumed (its
  /// executor's shutdown), for the socket's next receive.
  void leave_datagrams(bool resumed) noexcept;
  /// A listener's accept (from await_suspend, where the awaiter stays put): takes a connection kept in
  /// `stash` first, is woken for one kept while it waits (listed through `waiter`), and leaves there
  /// the one it completes with while its task is being cancelled.
  void keep_when_cancelled(accept_stash& stash, accept_waiter& waiter) noexcept;

 private:
  struct on_stop {
    io_op* op;
    void operator()() const noexcept { request_io_cancel(*op); }
  };

  [[noreturn]] static void abandoned_in_flight() noexcept;
  /// arm_cancellation() for an accept: lists it in its listener's stash (accept_stash.hpp).
  void wait_for_kept_connection() noexcept;
  /// arm_cancellation() for a UDP receive: lists it in its socket's stash (datagram_stash.hpp).
  void wait_for_kept_datagram() noexcept;
  /// check() for a UDP receive: takes a datagram handed to it while it waited, and leaves with the
  /// stash the datagrams a task being cancelled holds (datagram_stash.hpp).
  void settle_datagram(const socket_id& socket);
  /// Keeps in the socket's stash `handed` (at the front) and, if `own`, the datagram op_ completed with.
  void give_back_datagrams(const socket_id& socket, std::optional<kept_datagram>& handed, bool own);
  /// check() for an accept: takes a connection handed to it while it waited, and leaves with the
  /// stash the connections a task being cancelled holds (accept_stash.hpp).
  void settle_accept() noexcept;
  /// check() past its usual case: a cancelled read or receive, an accept, a failure.
  bool settle();
  /// check()'s answer for an op that succeeded: an error_code form's error cleared.
  bool succeeded() noexcept {
    if (error_ != nullptr && *error_) {
      error_->clear();  // only when set: clear() is an out-of-line call into the standard library
    }
    return true;
  }
  /// After resumption: whether a deadline is what ended the op: it ended cancelled (-ECANCELED),
  /// and either the timer's callback had called cancel_for_deadline, or it carried a linked timeout
  /// (whose firing the kernel reports as the op's -ECANCELED: uring_reactor.cpp) and that time had
  /// come. An op that completed on its own, with data or with its own error, was not timed out,
  /// however late its task resumed, on either path (judged by the clock alone, a zero timeout around
  /// a receive whose datagram was waiting returned timed_out and put the datagram back, every
  /// time); nor was one cancelled for another reason, such as its socket closed under it, before
  /// that time.
  bool deadline_cancelled() const noexcept {
    return op_.result == -ECANCELED && (deadline_cancel_ || (op_.link_deadline && linked_deadline_passed()));
  }
  /// deadline_cancelled() for a linked deadline: reads the clock once for the awaiter's life.
  bool linked_deadline_passed() const noexcept;
  /// A stop was requested on the op's token: its task (or the when_any branch) is being cancelled.
  bool stop_requested() const noexcept { return stop_ != nullptr && stop_->stop_requested(); }

  // In the order the design note's "Layout" gives: what a plain read or write touches first, beside
  // op_'s hot fields; the accept and UDP receive fields last.
  std::optional<stop_callback<on_stop>> stop_callback_;
  stop_state* stop_ = nullptr;
  std::error_code* error_;
  read_stash* stash_ = nullptr;  // a stream read's: where check() keeps bytes that arrived for a cancelled read
  const char* what_;  // the operation's name, for messages ("corio::net::tcp_stream::read_some")
  exclusive_claim claim_;  // a stream read's or write's (start_claimed)
  bool deadline_cancel_ = false;  // cancel_for_deadline ran (written before the timer's disarm returns)
  bool served_kept_ = false;      // a UDP receive served from its socket's datagram stash
  /// deadline_cancelled()'s one reading of the clock against a linked deadline, after resumption:
  /// 0 not read yet, 1 before the deadline, 2 at or past it.
  mutable std::uint8_t linked_deadline_reading_ = 0;

 protected:
  io_op op_;

 private:
  accept_waiter* accept_waiter_ = nullptr;  // an awaited accept's entry in its listener's stash (set when it starts)
  datagram_waiter* datagram_waiter_ = nullptr;  // an awaited UDP receive's entry in its socket's stash (likewise)
};

/// keep_while_open()'s bracket (fd_records.cpp): counts this thread in on the socket's number, or
/// returns false if the socket was closed since it was opened.
bool enter_while_open(const socket_id& socket) noexcept;
void leave_while_open(const socket_id& socket) noexcept;

template <class Keep>
void keep_while_open(const socket_id& socket, Keep&& keep) {
  if (!enter_while_open(socket)) {
    return;
  }
  struct leave_on_exit {
    const socket_id& socket;
    ~leave_on_exit() { leave_while_open(socket); }
  } leave{socket};
  keep();
}

inline void give_back_read(const socket_id& socket, read_stash* stash, std::span<const std::byte> bytes) {
  if (stash != nullptr) {
    keep_while_open(socket, [&] { stash->keep_front(bytes); });
  }
}

}  // namespace corio::detail
