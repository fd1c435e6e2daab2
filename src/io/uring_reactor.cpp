// The io_uring backend of the reactor (interface and contract in reactor.hpp).
//
// Design note.
// Ring: set up on the owning thread. A thread-bound ring (runtime worker) asks for SINGLE_ISSUER +
//   DEFER_TASKRUN (completions are run only when this thread waits, in one batch, with no IPIs), then
//   COOP_TASKRUN, then plain, whichever the kernel accepts (EINVAL -> next); an event loop's ring,
//   whose destructor may run on another thread, gets neither (a second submitter would be refused).
//   A thread-bound ring also registers its own descriptor with its thread (IORING_REGISTER_RING_FDS,
//   as the lab's plain liburing server does: each io_uring_enter then skips a file look-up). That
//   registration belongs to the thread, so the drain at shutdown, which runs on the owning thread,
//   drops it; later calls (the destructor's, on any thread) enter by the plain descriptor.
//   SQ 256, CQ 8192 entries: one op per connection fits 8192 connections per thread without relying
//   on the kernel's overflow list (which NODROP kernels have anyway).
// Submission: submit() only fills an SQE (user_data = the io_op's address, no look-up); the SQEs
//   of one loop turn go to the kernel together with the wait, in one io_uring_enter
//   (io_uring_submit_and_wait_timeout with EXT_ARG: the timeout is an argument, not an SQE). A full
//   SQ is flushed early. Cancel SQEs and the wake read carry reserved user_data values 0 and 1.
// Polls (a reap with a zero timeout: a worker spinning before it sleeps, a busy one's maintenance
//   tick) always enter the kernel: on a DEFER_TASKRUN ring only an io_uring_enter of this thread runs
//   the task work that posts completions. Rejected: polls that read the kernel's flags instead. With
//   TASKRUN_FLAG the kernel raises IORING_SQ_TASKRUN when task work is queued for an empty list and
//   clears it when the owner starts running the list, so a poll with nothing to submit, an empty CQ
//   ring and the flag down could skip the system call (only after an enter that posted nothing: one
//   enter runs at most 20 items, IO_LOCAL_TW_DEFAULT_MAX, and leaves the rest queued with the flag
//   down). Built (tests/net/spin_poll_test.cpp, kept, caught it skipping a poll with the flag up),
//   it took the echo at 1 client from about 20 io_uring_enter calls per request to 3, but not its
//   requests/s: a median 1.02x in four alternating blocks of four 2 s runs (0.84-1.09x), and no
//   change in CPU per request, since a spinning thread costs its spin's length whether it polls in
//   the kernel or in memory.
// Wake-up: an eventfd with one IORING_OP_READ always armed on it (re-armed after each completion);
//   wake() writes the eventfd, which completes the read and ends the wait. Rejected: IORING_OP_MSG_RING
//   from the waker's own ring when it has one (foreign threads do not): prototyped, it made no
//   measurable difference (two loops, each parked in its ring, handing a post back and forth: 0.99-1.01x
//   the hops/s in four alternating pairs), since a wake-up's cost is the kernel scheduling the
//   sleeping thread, not the read re-armed here; and a failed message needs a fallback to the eventfd.
// Whole transfers (write_all, io_op.hpp): a short send's CQE re-issues the op for the rest here.
// A receive that completes with -EAGAIN is issued again too, with IORING_RECVSEND_POLL_FIRST (it waits
//   for readiness before it tries): with several receives waiting on one socket (tasks sharing a UDP
//   socket), one datagram wakes them all, the first takes it, and the kernel ends the others with
//   -EAGAIN instead of waiting again; the socket is non-blocking (the epoll backend needs that), so
//   nothing else would make them wait. EAGAIN never reaches a task: one whose cancel was requested
//   meanwhile (a stop, its deadline's timer, shutdown) is not issued again and ends -ECANCELED, as
//   a receive cancelled while it waited does (a deadline counts only for an op that ended cancelled).
//   Rejected: POLL_FIRST for a stream's read after a short one, the way the epoll backend skips the
//   receive it expects to fail ("Readiness flag" there). It cost 9% of the echo's requests/s at
//   50 x 128 B and 5-8% at 500 x 1000 B (three alternating pairs each): within one submission of
//   many requests the peer has often answered by the time the kernel reaches the read, so trying it
//   at once usually succeeds, and the poll armed first is pure cost. Nor after a read that waited
//   (its CQE reaped in a later turn than the one that submitted it; 16-21% of the echo's reads at 50
//   and 300 clients, all of them at 1): 1.00x the requests/s at 1 client x 128 and 1000 B (the
//   failed attempt is small against a round trip) and 0.93-0.98x at 300 x 128 B, three or four
//   alternating pairs each.
// Linked timeouts (with_timeout, io_op.hpp "Linked deadlines"): an op that took a deadline is issued
//   as a pair, the op's SQE with IOSQE_IO_LINK and an IORING_OP_LINK_TIMEOUT after it. Both go into
//   one submission: next_sqe(2) flushes before the pair if fewer than two entries are free, never
//   between them (a flush there would send the op alone with a dangling link and the timeout after it
//   with nothing to link to; tests/net/linked_timeout_test.cpp fills the SQ to catch that). The
//   timeout is absolute (IORING_TIMEOUT_ABS on the timeouts' default clock, CLOCK_MONOTONIC), so
//   each re-issue of a whole transfer carries the same deadline, and its timespec lives in the op,
//   whose frame outlives the submission (the kernel copies it when it prepares the SQE). The timeout's
//   CQE carries the op's address | canceller_tag, and the op is reported (or re-issued) only once
//   both CQEs of its pair are in (io_op::cqes_due): a timeout that fires as the op completes cancels
//   by the op's user_data from task work that may run after the task issued its next request with
//   the same address, which it would then cancel (tests/net/linked_timeout_test.cpp, "racing");
//   its CQE comes after that task work, so waiting for it closes the window. Outcomes: the op
//   completes first (the timeout then completes -ECANCELED); the deadline passes first (the kernel
//   cancels the op, whose CQE says -ECANCELED while its state is still in_flight, and the awaiter
//   reads that as the deadline); an ASYNC_CANCEL for the op (outer cancellation) takes both.
//   Shutdown's ASYNC_CANCEL_ANY ends the timeouts along with everything else.
// Cancellation: cancel() queues IORING_OP_ASYNC_CANCEL for the op's address, whose CQE also carries
//   the op's address | canceller_tag and counts in cqes_due; the op then completes with -ECANCELED (or
//   with its real result if it won the race) and the buffer it names stays valid because its frame
//   stays suspended until that completion is reported.
// A canceller that misses: the kernel cancels by looking the op up among its waiting requests, and an
//   op whose poll was just woken (several ops on one socket, one datagram or connection waking them
//   all: one takes it, the others re-arm) can be in none of them for a moment. A linked timeout that
//   fires then completes -ENOENT and the op stays in the kernel with no deadline left (a receive
//   waited until the next datagram; a user trial's accept loop hung for good). So a canceller's CQE
//   (a linked timeout's or an ASYNC_CANCEL's) that says -ENOENT before the op's own CQE arrived sends
//   another ASYNC_CANCEL in its place, whose CQE takes over the count, until one finds the op or the
//   op's CQE is in; each round trip is one submission, and the op keeps its frame until the last.
// A socket closed under requests the kernel holds (forget(), from close_socket on the owning
//   thread, just before the close): one ASYNC_CANCEL keyed on the descriptor (CANCEL_FD | ALL; the
//   kernel compares files, so requests on the socket's registered file match too), submitted at once,
//   while the number still names the socket. `in_kernel_by_fd_` counts the requests issued on each
//   number whose CQE has not been seen, so the usual close, with nothing in the kernel, costs nothing.
// A socket closed on another thread: one with an io_source (a stream that read, a listener that
//   accepted, unless CORIO_URING_MULTISHOT=0) is shut down by its release there, which ends its
//   requests, and its close tells the source's owner, which lets go of it (uring_source.cpp,
//   "Release from another thread"). For the others (UDP sockets, sockets without a source), the
//   first request in the kernel on a number notes this reactor as a watcher of it (fd_records.hpp,
//   "Watchers"); a close elsewhere hands over a duplicate of the descriptor (forget_elsewhere, on the
//   closing thread, before the close), and the next reap submits an ASYNC_CANCEL_FD on it and then
//   closes the duplicate: the cancel names the closed socket's file even if its number already
//   names another socket. Sockets with an io_source skip the note, so an echo's sends pay one
//   comparison for all this.
//   An event loop's ring (no SINGLE_ISSUER) is cancelled in from the closing thread instead: a
//   synchronous cancel (IORING_REGISTER_SYNC_CANCEL, CANCEL_FD | ALL, while the descriptor still
//   names the socket) ends this ring's requests on it, a listener's armed multishot accept included,
//   and no duplicate is kept; the loop's next reap only lets go of the socket's io_source, if it has
//   one. A duplicate (or the request) kept the socket until the loop ran again, which for a loop that
//   is not running (block_on returned) could be never: its port stayed bound (a user trial). The
//   kernel finishes a cancelled request, and drops its reference to the file, in task work on the
//   loop's thread, which it interrupts for that at once (no COOP_TASKRUN on these rings): on the
//   loop's own thread the port is free when the close returns; from another thread, as soon as the
//   loop's thread has entered or left the kernel once (it is made to). The registration runs under
//   registry_mutex(), like every forget_elsewhere, so the ring cannot be closed under it (the reactor
//   withdraws from the registry first), and the kernel serialises it with the loop's own submissions
//   (ring lock); it touches nothing in user memory. A worker's ring (SINGLE_ISSUER: the kernel refuses
//   registrations from other threads) keeps the duplicate: its thread is always running or woken.
//   Nothing else touches the ring off its thread.
// Requests that name a descriptor number (not a registered file): the kernel looks the number up when
//   it takes the request, at the next submission, which may come a whole loop turn after the request
//   was prepared; a close on another thread in between could let it reach the socket that reused the
//   number. Each such request (an op's, or the multishot a source arms: a listener's accept, a recv
//   without a registered file, named by the generation the source was made with) is listed (by_number_,
//   with its SQ position) when prepared, and every submission runs inside the enter_calls() bracket of
//   their numbers (fd_records.hpp, "Calls"; submit_guarded): a request whose socket was closed since
//   its op (or source) was made becomes a NOP tagged refused_tag, reported -ECANCELED (to the source as
//   a multishot's last CQE); a close that comes later waits until the kernel has taken the file (the
//   look-up happens in io_uring_enter, since these requests are issued inline: the op heads its link,
//   and nothing here asks for IOSQE_ASYNC). A reap that would wait submits them first on their own, so
//   no bracket spans the wait: one more io_uring_enter on the turns that prepared such requests and
//   then sleep; the echo's registered-file requests never pay it. Entries the kernel did not take (a
//   submission that failed) stay listed for the next one.
// Shutdown (cancel_all_and_reap), in order:
//   0. complete every op parked on a source's queue with -ECANCELED (no kernel request holds it);
//   1. queue ASYNC_CANCEL_ANY (every request of this ring, the wake read and multishots included);
//   2. submit and wait until every op and the wake read have posted their completion, re-issuing the
//      cancel every 100 ms in case a request was being issued to io-wq when the first one ran;
//   3. report each op; the ring then holds nothing that points into user memory, and closing it (the
//      destructor, on any thread) is safe.
// Multishot accept and recv: sockets given an io_source are served by one multishot op each
//   (uring_source.cpp); their CQEs carry the source's address with bit 1 set.
// Invariants: `in_flight_` counts ops submitted (or parked on a source) and not yet reported; `wake_armed_` says whether the
//   wake read is in the kernel. Owning thread only, except wake().
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <system_error>
#include <utility>

#include "io/fd_records.hpp"
#include "io/uring_reactor.hpp"

namespace corio::detail {
namespace {

constexpr unsigned sq_entries = 256;
constexpr unsigned cq_entries = 8192;
constexpr std::uint64_t ignored_tag = 0;
constexpr std::uint64_t wake_tag = 1;
// | an op's address: the CQE of a request that cancels the op (its linked timeout, or an ASYNC_CANCEL)
constexpr std::uint64_t canceller_tag = 4;
// | an op's address or a source's tag (never equal to wake_tag): a NOP in place of a request on a
// closed socket's number
constexpr std::uint64_t refused_tag = 1;

int setup_ring(io_uring& ring, bool thread_bound) noexcept {
  const unsigned common = IORING_SETUP_CQSIZE | IORING_SETUP_SUBMIT_ALL;
  const unsigned bound_flags[] = {
      common | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
      common | IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
      IORING_SETUP_CQSIZE,
      0,
  };
  const unsigned loop_flags[] = {common, IORING_SETUP_CQSIZE, 0};
  const unsigned* first = thread_bound ? bound_flags : loop_flags;
  const std::size_t count = thread_bound ? std::size(bound_flags) : std::size(loop_flags);
  int result = -EINVAL;
  for (std::size_t i = 0; i < count && result == -EINVAL; ++i) {
    io_uring_params params{};
    params.flags = first[i];
    params.cq_entries = cq_entries;
    result = io_uring_queue_init_params(sq_entries, &ring, &params);
  }
  return result;
}

__kernel_timespec to_timespec(std::chrono::nanoseconds timeout) noexcept {
  auto ns = timeout.count() > 0 ? timeout.count() : 0;
  return {.tv_sec = ns / 1'000'000'000, .tv_nsec = ns % 1'000'000'000};
}

}  // namespace

uring_reactor::uring_reactor(bool thread_bound) : thread_bound_(thread_bound) {
  if (int result = setup_ring(ring_, thread_bound); result < 0) {
    throw std::system_error(-result, std::system_category(), "corio: io_uring backend: io_uring_setup");
  }
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) {
    int error = errno;
    io_uring_queue_exit(&ring_);
    throw std::system_error(error, std::system_category(), "corio: io_uring backend: eventfd");
  }
  try {
    enroll(*this, id_);
  } catch (...) {
    io_uring_queue_exit(&ring_);
    ::close(wake_fd_);
    throw;
  }
  ring_registered_ = thread_bound && io_uring_register_ring_fd(&ring_) == 1;
  setup_multishot();
}

uring_reactor::~uring_reactor() {
  withdraw(*this);  // from here no close on another thread reaches this reactor
  for (closed_socket each : closed_elsewhere_.take()) {
    if (each.kept >= 0) {
      ::close(each.kept);
    }
  }
  cancel_all_and_reap({[](void*, io_op&) noexcept {}, nullptr});  // nothing left unless misused
  teardown_buffers();
  io_uring_queue_exit(&ring_);
  ::close(wake_fd_);
}

bool uring_reactor::submit(io_op& op) noexcept {
  if (serves_from_source(op)) {
    return submit_with_source(op);
  }
  prep_single(op);
  ++in_flight_;
  return false;
}

void uring_reactor::prep_single(io_op& op, bool poll_first) noexcept {
  io_uring_sqe* sqe = next_sqe(op.link_deadline ? 2 : 1);  // a linked pair: both in one submission
  count_in_kernel(op.fd, 1);
  if (op.source == nullptr) [[unlikely]] {
    note_request_without_source(op.fd);
  }
  switch (op.kind) {
    case io_kind::recv:
      io_uring_prep_recv(sqe, op.fd, op.buffer, op.length, 0);
      break;
    case io_kind::send:
      io_uring_prep_send(sqe, op.fd, op.buffer, op.length, MSG_NOSIGNAL);
      break;
    case io_kind::accept:
      io_uring_prep_accept(sqe, op.fd, static_cast<sockaddr*>(op.buffer), op.address_length,
                           SOCK_NONBLOCK | SOCK_CLOEXEC);
      break;
    case io_kind::connect:
      io_uring_prep_connect(sqe, op.fd, static_cast<const sockaddr*>(op.buffer), op.length);
      break;
    case io_kind::recvmsg:
      io_uring_prep_recvmsg(sqe, op.fd, static_cast<msghdr*>(op.buffer), 0);
      break;
    case io_kind::sendmsg:
      io_uring_prep_sendmsg(sqe, op.fd, static_cast<const msghdr*>(op.buffer), MSG_NOSIGNAL);
      break;
  }
  if (op.source != nullptr) {
    io_source* source = op.source->load(std::memory_order_relaxed);
    use_fixed_file(sqe, source);
    hold(op, source);
  }
  if ((sqe->flags & IOSQE_FIXED_FILE) == 0) {
    list_by_number(sqe, {op.fd, op.generation, op.record});
  }
  if (poll_first) {
    sqe->ioprio |= IORING_RECVSEND_POLL_FIRST;
  }
  io_uring_sqe_set_data64(sqe, reinterpret_cast<std::uintptr_t>(&op));
  op.cqes_due = 1;
  op.answered = false;
  if (op.link_deadline) {
    sqe->flags |= IOSQE_IO_LINK;
    io_uring_sqe* timeout = io_uring_get_sqe(&ring_);  // reserved above: the SQ is not flushed in between
    io_uring_prep_link_timeout(timeout, &op.deadline, IORING_TIMEOUT_ABS);
    io_uring_sqe_set_data64(timeout, reinterpret_cast<std::uintptr_t>(&op) | canceller_tag);
    op.cqes_due = 2;
    ++linked_timeouts_;
  }
}

void uring_reactor::count_in_kernel_slow(int fd, int change) noexcept {
  if (fd < 0) {
    return;  // a closed socket's op: the kernel answers EBADF, and forget() never sees it
  }
  auto index = static_cast<std::size_t>(fd);
  in_kernel_by_fd_.resize(std::max(index + 1, in_kernel_by_fd_.size() * 2));
  in_kernel_by_fd_[index] += static_cast<std::uint32_t>(change);
}

void uring_reactor::note_request_without_source(int fd) noexcept {
  auto index = static_cast<std::size_t>(fd);
  if (fd >= 0 && index < in_kernel_by_fd_.size() && in_kernel_by_fd_[index] == 1) {
    note_watcher(record_of(fd, true), id_);  // its first request in the kernel: see "A socket closed on another thread"
  }
}

void uring_reactor::forget(int fd) noexcept {
  auto index = static_cast<std::size_t>(fd);
  if (fd < 0 || index >= in_kernel_by_fd_.size() || in_kernel_by_fd_[index] == 0) {
    return;  // the usual close: nothing of this socket in the kernel
  }
  io_uring_sqe* sqe = next_sqe();
  io_uring_prep_cancel_fd(sqe, fd, IORING_ASYNC_CANCEL_ALL);  // matches requests on its registered file too
  io_uring_sqe_set_data64(sqe, ignored_tag);
  // Now: after the close() that follows, the number names nothing (or another socket).
  submit_guarded([this] { io_uring_submit(&ring_); });
}

void uring_reactor::forget_elsewhere(int fd, std::uint32_t) noexcept {
  if (cancel_from_here(fd)) {
    closed_elsewhere_.push({fd, -1});  // only its io_source, if it has one here, is left to let go of
    return;
  }
  int kept = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);  // the socket's file, whatever the number names after the close
  if (kept < 0) {
    return;  // out of descriptors: its requests end at shutdown
  }
  if (!closed_elsewhere_.push({fd, kept})) {
    ::close(kept);
  }
}

bool uring_reactor::cancel_from_here(int fd) noexcept {
  if (thread_bound_) {
    return false;  // SINGLE_ISSUER: the kernel refuses a registration from another thread
  }
  io_uring_sync_cancel_reg cancel{};
  cancel.fd = fd;
  cancel.flags = IORING_ASYNC_CANCEL_FD | IORING_ASYNC_CANCEL_ALL;
  cancel.timeout = {0, 0};  // a request an io-wq worker is running: do not wait, take the duplicate's path
  return ::syscall(__NR_io_uring_register, ring_.ring_fd, IORING_REGISTER_SYNC_CANCEL, &cancel, 1) >= 0;
}

void uring_reactor::cancel_closed_elsewhere() noexcept {
  std::vector<closed_socket> closed = closed_elsewhere_.take();
  if (closed.empty()) {
    return;
  }
  for (closed_socket each : closed) {
    if (each.kept >= 0) {
      io_uring_sqe* sqe = next_sqe();
      io_uring_prep_cancel_fd(sqe, each.kept, IORING_ASYNC_CANCEL_ALL);
      io_uring_sqe_set_data64(sqe, ignored_tag);
    }
  }
  submit_guarded([this] { io_uring_submit(&ring_); });  // each cancel now holds the socket's file itself
  for (closed_socket each : closed) {
    if (each.kept >= 0) {
      ::close(each.kept);
    }
    release_closed_elsewhere(each.fd);
  }
}

void uring_reactor::cancel(io_op& op) noexcept {
  if (cancel_parked(op) || op.cqes_due == 0) {
    return;  // it waited on its source's queue, or its source's release finished it: not in the kernel
  }
  ++op.cqes_due;
  send_cancel(op);
}

void uring_reactor::send_cancel(io_op& op) noexcept {
  io_uring_sqe* sqe = next_sqe();
  io_uring_prep_cancel64(sqe, reinterpret_cast<std::uintptr_t>(&op), 0);
  io_uring_sqe_set_data64(sqe, reinterpret_cast<std::uintptr_t>(&op) | canceller_tag);
}

void uring_reactor::reap(completion_sink sink, std::optional<std::chrono::nanoseconds> timeout, std::size_t limit) noexcept {
  cancel_closed_elsewhere();
  if (!wake_armed_) {
    arm_wake();
  }
  if (finished_here_ != nullptr || (timeout && timeout->count() <= 0)) {
    submit_guarded([this] { io_uring_submit_and_get_events(&ring_); });
  } else {
    submit_by_number();  // no bracket may span the wait
    io_uring_cqe* cqe = nullptr;
    __kernel_timespec wait_for{};
    if (timeout) {
      wait_for = to_timespec(*timeout);
    }
    io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, timeout ? &wait_for : nullptr, nullptr);
  }
  cancel_closed_elsewhere();  // a close on another thread may be what woke us
  report_completions(sink, limit);
}

void uring_reactor::wake() noexcept {
  eventfd_t one = 1;
  ::eventfd_write(wake_fd_, one);
}

void uring_reactor::cancel_all_and_reap(completion_sink sink) noexcept {
  draining_ = true;
  detach_all_parked();
  report_completions(sink, SIZE_MAX);
  submit_by_number();
  while (in_flight_ != 0 || armed_ != 0 || wake_armed_) {
    io_uring_sqe* sqe = next_sqe();
    io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
    io_uring_sqe_set_data64(sqe, ignored_tag);
    io_uring_cqe* cqe = nullptr;
    __kernel_timespec limit = to_timespec(std::chrono::milliseconds(100));
    int result = io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &limit, nullptr);
    report_completions(sink, SIZE_MAX);
    if (result == -EEXIST) {
      break;  // a SINGLE_ISSUER ring reached from a foreign thread: only its owner could drain it
    }
  }
  if (ring_registered_) {
    io_uring_unregister_ring_fd(&ring_);
    ring_registered_ = false;
  }
}

io_uring_sqe* uring_reactor::next_sqe(unsigned room) noexcept {
  if (room == 1) {
    if (io_uring_sqe* sqe = io_uring_get_sqe(&ring_)) {
      return sqe;  // the common case: one look at the ring's head
    }
  }
  while (io_uring_sq_space_left(&ring_) < room) {  // the SQ is full: hand this turn's entries to the kernel early
    submit_guarded([this] { io_uring_submit(&ring_); });
  }
  return io_uring_get_sqe(&ring_);
}

void uring_reactor::list_by_number(io_uring_sqe* sqe, socket_id socket) noexcept {
  try {
    by_number_.push_back({sqe, socket, ring_.sq.sqe_tail - 1});
  } catch (const std::bad_alloc&) {  // unguarded, as every request was before the list existed
  }
}

void uring_reactor::enter_by_number() noexcept {
  for (by_number_request& each : by_number_) {
    if (each.refused) {
      continue;  // a NOP already, left in the SQ by a submission that failed
    }
    each.record = record_for(each.socket.fd, each.socket.record, false);
    if (!enter_calls(each.record, each.socket.generation)) {
      const std::uint64_t tag = each.sqe->user_data;
      const auto link = static_cast<std::uint8_t>(each.sqe->flags & IOSQE_IO_LINK);  // its linked timeout follows
      io_uring_prep_nop(each.sqe);
      each.sqe->flags |= link;
      io_uring_sqe_set_data64(each.sqe, tag | refused_tag);
      each.record = nullptr;  // not entered
      each.refused = true;
    }
  }
}

void uring_reactor::leave_by_number() noexcept {
  const unsigned taken = io_uring_smp_load_acquire(ring_.sq.khead);  // the kernel took the entries before it
  std::erase_if(by_number_, [taken](by_number_request& each) {
    if (!each.refused) {
      leave_calls(each.record);
    }
    return taken_by_kernel(each.position, taken);
  });
}

void uring_reactor::submit_by_number() noexcept {
  if (!by_number_.empty()) {
    submit_guarded([this] { io_uring_submit(&ring_); });
  }
}

void uring_reactor::arm_wake() noexcept {
  if (draining_) {
    return;
  }
  io_uring_sqe* sqe = next_sqe();
  io_uring_prep_read(sqe, wake_fd_, &wake_buffer_, sizeof(wake_buffer_), 0);
  io_uring_sqe_set_data64(sqe, wake_tag);
  wake_armed_ = true;
}

void uring_reactor::report_completions(completion_sink sink, std::size_t limit) noexcept {
  while (finished_here_ != nullptr) {
    io_op* op = std::exchange(finished_here_, finished_here_->next);
    --in_flight_;
    sink(*op);
  }
  unsigned head = 0;
  unsigned seen = 0;
  io_uring_cqe* cqe = nullptr;
  io_uring_for_each_cqe(&ring_, head, cqe) {
    if (seen == limit) {
      break;  // the rest stay in the CQ ring for the next reap
    }
    ++seen;
    std::uint64_t tag = io_uring_cqe_get_data64(cqe);
    if (tag == ignored_tag) {
      continue;
    }
    if (tag == wake_tag) {
      wake_armed_ = false;  // re-armed at the start of the next reap
      continue;
    }
    if ((tag & uring_source_tag) != 0) {
      const std::uint64_t address = tag & ~(uring_source_tag | refused_tag);
      auto* source = reinterpret_cast<io_source*>(static_cast<std::uintptr_t>(address));
      if ((tag & refused_tag) != 0) {
        on_source_completion(*source, -ECANCELED, 0, sink);  // a multishot never armed: the socket had closed
      } else {
        on_source_completion(*source, cqe->res, cqe->flags, sink);
      }
      continue;
    }
    auto* op = reinterpret_cast<io_op*>(static_cast<std::uintptr_t>(tag & ~(canceller_tag | refused_tag)));
    if ((tag & canceller_tag) == 0) {
      op->answered = true;
      count_in_kernel(op->fd, -1);
      std::int32_t result = (tag & refused_tag) != 0 ? -ECANCELED : cqe->res;
      op->result = op->held_on != nullptr ? end_held(*op, result) : result;
    } else if (cqe->res == -ENOENT && !op->answered) {
      send_cancel(*op);  // it missed the op (see "A canceller that misses"): another takes its place
      continue;
    }
    if (--op->cqes_due == 0) {
      finish(*op, sink);
    }
  }
  io_uring_cq_advance(&ring_, seen);
}

void uring_reactor::finish(io_op& op, completion_sink sink) noexcept {
  const bool woken_for_nothing = op.result == -EAGAIN && (op.kind == io_kind::recv || op.kind == io_kind::recvmsg);
  if ((op.advance_whole(op.result) || woken_for_nothing) && !draining_ &&
      op.state.load(std::memory_order_acquire) == io_state::in_flight) {
    // A short send of a whole transfer: the rest goes out without resuming the task. A receive
    // another one beat to the data: it waits for the next (see "A receive that completes with -EAGAIN").
    prep_single(op, woken_for_nothing);
    return;
  }
  if (woken_for_nothing) {
    op.result = -ECANCELED;  // its cancel came first: it took nothing
  }
  --in_flight_;
  sink(op);
}

std::unique_ptr<reactor> make_uring_reactor(bool thread_bound) { return std::make_unique<uring_reactor>(thread_bound); }

int probe_io_uring() noexcept {
  io_uring ring{};
  int result = io_uring_queue_init(2, &ring, 0);
  if (result < 0) {
    return -result;
  }
  io_uring_queue_exit(&ring);
  return 0;
}

}  // namespace corio::detail
