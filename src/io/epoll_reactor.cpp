// The epoll backend of the reactor (interface and contract in reactor.hpp).
//
// Design note.
// Readiness: submit() tries the system call at once (non-blocking: MSG_DONTWAIT, accept4 with
//   SOCK_NONBLOCK, a non-blocking connect); only on EAGAIN does the op wait, in its fd's list of
//   readers (recv, recvmsg, accept) or writers (send, sendmsg, connect). An fd is registered once
//   per reactor, edge-triggered for both directions (EPOLLIN | EPOLLPRI | EPOLLOUT | EPOLLRDHUP |
//   EPOLLET), so a wait costs no epoll_ctl; an event retries the waiting ops of that direction in
//   FIFO order until one gets EAGAIN again. Edge-triggered is enough because an op only waits after its own syscall
//   saw EAGAIN, and every later arrival of data (or of send-buffer room) is a new edge.
//   A whole transfer (write_all) repeats its send while it makes progress (attempt_whole) and waits
//   for writability only when the send buffer is full.
// Readiness flag (reads only): once an fd is watched, its entry remembers whether the last read
//   would block (EAGAIN, or a stream recv that returned less than it asked for: the receive queue is
//   empty). While the flag is clear, a new read waits for the event without trying its syscall: a
//   request/response loop then costs one recv and one send per message, not a third recv that fails.
//   An event sets the flag again. Safe with edge triggering because every arrival after the syscall
//   that found the queue empty is a new edge, reported by a later epoll_wait on this same thread.
//   A write tries its syscall whenever no other write waits: a send buffer frees room as the peer
//   acknowledges, long before epoll reports it writable (a third of the buffer free), so a write
//   after one that timed out takes the room there is, as the io_uring backend's does. Behind a
//   waiting write it queues, so writes start in the order they were issued.
// The fd table: `fds_` is indexed by descriptor number, so an event finds its ops without hashing.
//   A descriptor number is reused after close(), and the kernel drops a closed file from every epoll
//   set by itself, so a stale "registered" flag would leave the next socket with that number
//   unregistered and its ops asleep forever. Every corio socket closes through close_socket(), which
//   first bumps a process-wide generation for that number (fd_records.hpp); an entry whose generation is stale is
//   registered again (EPOLL_CTL_ADD, or MOD if the file is in fact still there). Ops still waiting in
//   a stale entry belong to the closed socket: they end with -ECANCELED then, never retried on the
//   new one. A close on a thread that runs a reactor first tells it (forget), which ends that
//   socket's waiting ops at once.
// Closed on another thread (fd_records.hpp, "Watchers"): an op that parks notes this reactor as a
//   watcher of the number; a close elsewhere queues (fd, generation) through forget_elsewhere(), and the
//   reactor ends the waiters of an entry still at that generation at the start of its next reap and
//   right after its wait (an entry already watching a newer socket with that number is left alone:
//   its watch() ended the old waiters). Each submit and each event's retries on an entry run inside
//   the number's enter_calls() bracket (fd_records.hpp, "Calls") for the op's socket, so a close on
//   another thread never falls between an op's system call and its note: it either refuses the
//   bracket (the op ends -ECANCELED with no system call, the entry's waiters end) or waits for it
//   and then finds the note.
// Cancellation: cancel() unlinks the op, gives it -ECANCELED and keeps it for the next reap(), which
//   then does not block. Shutdown (cancel_all_and_reap): 1. every waiting op is unlinked and reported
//   with -ECANCELED; 2. the cancelled ops not yet reported are reported. The kernel never held a
//   pointer to user memory, so nothing is waited for.
// Turn size: one reap takes at most 64 events. Their retries (the reads) run back to back, before
//   any task they wake runs, so a turn's reads come in one burst and the writes they lead to in the
//   next. Each stream read frees socket buffers the peer's CPU allocated; Linux hands them back to
//   that CPU and interrupts it for every 32 (deferred skb free). At 500 busy echo connections a
//   256-event turn made up to 256 reads in a row: 0.015 such interrupts per request, against 0.002
//   for c-epoll, which alternates read and write per socket. With 64: 0.0065, and 4-7% more
//   requests/s at 500 clients, about 3% at 150-300 and no change at 1-50 (alternating runs against
//   the 256-event build), for one more epoll_wait per 64 ready sockets.
// Wake-up: an eventfd in the set (level-triggered); reap() reads it to reset it.
// Threads: owning thread only, except wake() and forget_elsewhere() (any thread; the latter under the
//   registry mutex, which guards forget_requests_'s list).
// Rejected: EPOLLONESHOT re-armed per wait (an epoll_ctl per EAGAIN, ~20% more syscalls per echo);
//   level-triggered (an fd with unread data and no waiter would end every epoll_wait at once).
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <system_error>
#include <utility>
#include <vector>

#include "io/fd_records.hpp"
#include "io/reactor.hpp"

namespace corio::detail {
namespace {

constexpr std::uint64_t wake_tag = UINT64_MAX;
constexpr std::size_t max_events = 64;  // see "Turn size"

bool is_reader(io_kind kind) noexcept {
  return kind == io_kind::recv || kind == io_kind::recvmsg || kind == io_kind::accept;
}

// One non-blocking attempt: the result, or -errno (-EAGAIN: wait for readiness). The per-message
// calls go through syscall(2), not libc's recv/send/recvmsg/sendmsg: those are pthread cancellation
// points, and bracket the system call with two calls that switch asynchronous cancellation on and off
// (~60 instructions per echoed message, a tenth of the worker's own work at 300 clients). corio never
// cancels its threads with pthread_cancel, so the bracket buys nothing.
int attempt(io_op& op) noexcept {
  for (;;) {
    long result = 0;
    switch (op.kind) {
      case io_kind::recv:
        result = ::syscall(SYS_recvfrom, op.fd, op.buffer, op.length, MSG_DONTWAIT, nullptr, nullptr);
        break;
      case io_kind::send:
        result = ::syscall(SYS_sendto, op.fd, op.buffer, op.length, MSG_DONTWAIT | MSG_NOSIGNAL, nullptr, 0);
        break;
      case io_kind::accept:
        result = ::accept4(op.fd, static_cast<sockaddr*>(op.buffer), op.address_length, SOCK_NONBLOCK | SOCK_CLOEXEC);
        break;
      case io_kind::recvmsg:
        result = ::syscall(SYS_recvmsg, op.fd, op.buffer, MSG_DONTWAIT);
        break;
      case io_kind::sendmsg:
        result = ::syscall(SYS_sendmsg, op.fd, op.buffer, MSG_DONTWAIT | MSG_NOSIGNAL);
        break;
      case io_kind::connect:
        if (!op.started) {
          op.started = true;
          result = ::connect(op.fd, static_cast<const sockaddr*>(op.buffer), op.length);
          if (result < 0 && errno == EINPROGRESS) {
            return -EAGAIN;
          }
        } else {
          int error = 0;
          socklen_t size = sizeof(error);
          if (::getsockopt(op.fd, SOL_SOCKET, SO_ERROR, &error, &size) < 0) {
            error = errno;
          }
          return -error;
        }
        break;
    }
    if (result >= 0) {
      return static_cast<int>(result);
    }
    if (errno != EINTR) {
      return errno == EWOULDBLOCK ? -EAGAIN : -errno;
    }
  }
}

// attempt(), repeated while a whole transfer (write_all, io_op.hpp) makes progress: its op waits
// only when the socket's send buffer is full, and is finished once everything is sent.
int attempt_whole(io_op& op) noexcept {
  for (;;) {
    int result = attempt(op);  // its one call: inlined
    if (!op.advance_whole(result)) {
      return result;
    }
  }
}

struct op_list {
  io_op* head = nullptr;
  io_op* tail = nullptr;

  void push(io_op& op) noexcept {
    op.next = nullptr;
    (tail != nullptr ? tail->next : head) = &op;
    tail = &op;
  }
  io_op* pop() noexcept {
    io_op* first = head;
    if (first != nullptr) {
      head = first->next;
      if (head == nullptr) {
        tail = nullptr;
      }
    }
    return first;
  }
  bool remove(io_op& op) noexcept {
    io_op* previous = nullptr;
    for (io_op* each = head; each != nullptr; previous = each, each = each->next) {
      if (each == &op) {
        (previous != nullptr ? previous->next : head) = op.next;
        if (tail == &op) {
          tail = previous;
        }
        return true;
      }
    }
    return false;
  }
};

struct fd_entry {
  op_list readers;
  op_list writers;
  fd_record* record = nullptr;  // the number's process-wide record (null only if memory ran out)
  std::uint32_t generation = 0;
  bool registered = false;
  // What the last read or event says of the receive queue; false: the next read waits for an event
  // without trying its syscall (it would return EAGAIN).
  bool readable = true;
  // An event said the peer closed its side (EPOLLRDHUP), or the socket hung up or failed: that edge
  // is spent, so no later one will announce the end of file a read still has to see.
  bool read_closed = false;
  // An event said urgent (out-of-band) data arrived (EPOLLPRI): a TCP read stops short at its mark
  // with the rest of the stream behind it, so from then on a short read does not mean drained.
  bool urgent = false;
};

// A stream recv that returned less than it asked for emptied the socket's receive queue: data that
// arrives later is a new edge, so the next read may wait for the event instead of trying first.
// Not once the peer's FIN was signalled: it may have come with the data just read, and its edge with
// it (epoll reports both in one event), so the next read must try and see the end of file. Nor once
// urgent data came: a read stops at its mark, short, with data queued behind it.
bool drained(const fd_entry& entry, const io_op& op, int result) noexcept {
  return op.kind == io_kind::recv && result > 0 && static_cast<std::uint32_t>(result) < op.length &&
         !entry.read_closed && !entry.urgent;
}

class epoll_reactor final : public reactor {
 public:
  epoll_reactor() {
    epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd_ < 0) {
      throw std::system_error(errno, std::system_category(), "corio: epoll backend: epoll_create1");
    }
    wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u64 = wake_tag;
    if (wake_fd_ < 0 || ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &event) < 0) {
      int error = errno;
      ::close(epoll_fd_);
      if (wake_fd_ >= 0) {
        ::close(wake_fd_);
      }
      throw std::system_error(error, std::system_category(), "corio: epoll backend: eventfd");
    }
    try {
      enroll(*this, id_);
    } catch (...) {
      ::close(epoll_fd_);
      ::close(wake_fd_);
      throw;
    }
  }

  ~epoll_reactor() override {
    withdraw(*this);  // from here no close on another thread reaches this reactor
    ::close(epoll_fd_);
    ::close(wake_fd_);
  }

  void forget_elsewhere(int fd, std::uint32_t generation) noexcept override {
    // If memory ran out, its waiters end when the number is next watched here, or at shutdown.
    forget_requests_.push({fd, generation});
  }

  bool submit(io_op& op) noexcept override {
    fd_entry* entry = watched(op.fd);
    fd_record* record = entry != nullptr ? entry->record : record_for(op.fd, op.record, true);
    if (!enter_calls(record, op.generation)) {  // its socket was closed since the op was made
      op.result = -ECANCELED;
      return true;
    }
    const bool done = submit_entered(op, entry, record);
    leave_calls(record);
    return done;
  }

  void cancel(io_op& op) noexcept override {
    fd_entry& entry = fds_[static_cast<std::size_t>(op.fd)];
    if ((is_reader(op.kind) ? entry.readers : entry.writers).remove(op)) {
      op.result = -ECANCELED;
      finished_.push(op);
    }
  }

  void reap(completion_sink sink, std::optional<std::chrono::nanoseconds> timeout, std::size_t limit) noexcept override {
    take_forget_requests();
    if (finished_.head != nullptr) {
      timeout = std::chrono::nanoseconds::zero();
    }
    epoll_event events[max_events];
    int count = wait(events, std::clamp<std::size_t>(limit, 1, max_events), timeout);
    take_forget_requests();  // a close on another thread may be what woke us
    for (int i = 0; i < count; ++i) {
      const epoll_event& event = events[i];
      if (event.data.u64 == wake_tag) {
        eventfd_t ignored = 0;
        ::eventfd_read(wake_fd_, &ignored);
        continue;
      }
      fd_entry& entry = fds_[static_cast<std::size_t>(event.data.u64)];
      if ((event.events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0) {
        entry.read_closed = true;
      }
      if ((event.events & EPOLLPRI) != 0) {
        entry.urgent = true;
      }
      if ((event.events & (EPOLLIN | EPOLLPRI | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0) {
        entry.readable = true;
        retry(entry, true);  // its readers
      }
      if ((event.events & (EPOLLOUT | EPOLLHUP | EPOLLERR)) != 0) {
        retry(entry, false);  // its writers
      }
    }
    while (io_op* op = finished_.pop()) {
      sink(*op);
    }
  }

  void wake() noexcept override {
    eventfd_t one = 1;
    ::eventfd_write(wake_fd_, one);
  }

  void cancel_all_and_reap(completion_sink sink) noexcept override {
    for (fd_entry& entry : fds_) {
      finish_waiting(entry);
    }
    while (io_op* op = finished_.pop()) {
      sink(*op);
    }
  }

  void forget(int fd) noexcept override {
    if (fd_entry* entry = watched(fd)) {
      drop_closed(*entry);  // closed right after this
    }
  }

  io_backend kind() const noexcept override { return io_backend::epoll; }

 private:
  // submit() inside the op's enter_calls() bracket (fd_records.hpp, "Calls"); `entry`: the op's number's
  // if this reactor watches its socket already, else null. Returns whether the op is done.
  bool submit_entered(io_op& op, fd_entry* entry, fd_record* record) noexcept {
    const bool reader = is_reader(op.kind);
    if (entry == nullptr || (reader ? entry->readable : entry->writers.head == nullptr)) {
      int result = attempt_whole(op);
      if (result != -EAGAIN) {
        if (entry != nullptr && drained(*entry, op, result)) {
          entry->readable = false;
        }
        op.result = result;
        return true;
      }
      if (entry == nullptr) {
        if (int error = watch(op.fd, record, op.generation); error != 0) {
          op.result = -error;
          return true;
        }
        entry = &fds_[static_cast<std::size_t>(op.fd)];
      }
      if (reader) {
        entry->readable = false;
      }
    }
    (reader ? entry->readers : entry->writers).push(op);
    note_watcher(record, id_);
    return false;
  }

  // Registers `fd`, the socket opened at `generation` (whose `record` the caller holds, inside
  // enter_calls()), with this reactor's epoll set. Returns 0 or an errno.
  int watch(int fd, fd_record* record, std::uint32_t generation) noexcept {
    auto index = static_cast<std::size_t>(fd);
    if (index >= fds_.size()) {
      fds_.resize(std::max(index + 1, fds_.size() * 2));
    }
    fd_entry& entry = fds_[index];
    entry.record = record;
    finish_waiting(entry);  // ops of a socket closed on another thread: never the new socket's reads
    epoll_event event{};
    event.events = EPOLLIN | EPOLLPRI | EPOLLOUT | EPOLLRDHUP | EPOLLET;
    event.data.u64 = index;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event) < 0 &&
        (errno != EEXIST || ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &event) < 0)) {
      return errno;
    }
    entry.registered = true;
    entry.generation = generation;
    entry.readable = true;
    entry.read_closed = false;
    entry.urgent = false;
    return 0;
  }

  int wait(epoll_event* events, std::size_t capacity, std::optional<std::chrono::nanoseconds> timeout) noexcept {
    timespec limit{};
    if (timeout) {
      auto ns = timeout->count() > 0 ? timeout->count() : 0;
      limit = {.tv_sec = static_cast<time_t>(ns / 1'000'000'000), .tv_nsec = static_cast<long>(ns % 1'000'000'000)};
    }
    const auto room = static_cast<int>(capacity);
    int count = ::epoll_pwait2(epoll_fd_, events, room, timeout ? &limit : nullptr, nullptr);
    if (count < 0 && errno == ENOSYS) {  // kernels before 5.11: millisecond timeouts, rounded up
      int ms = -1;
      if (timeout) {
        std::int64_t ns = std::max<std::int64_t>(timeout->count(), 0);
        ms = static_cast<int>(std::min<std::int64_t>(ns / 1'000'000 + (ns % 1'000'000 != 0), INT32_MAX));
      }
      count = ::epoll_wait(epoll_fd_, events, room, ms);
    }
    return count < 0 ? 0 : count;
  }

  // Ends every op waiting on `entry` with -ECANCELED, reported at the end of the next reap().
  void finish_waiting(fd_entry& entry) noexcept {
    for (op_list* list : {&entry.readers, &entry.writers}) {
      while (io_op* op = list->pop()) {
        op->result = -ECANCELED;
        finished_.push(*op);
      }
    }
  }

  // `entry`'s socket is closed: its waiters end, and the number's next socket registers afresh (the
  // close drops the file from the epoll set).
  void drop_closed(fd_entry& entry) noexcept {
    finish_waiting(entry);
    entry.registered = false;
  }

  // Runs the waiting ops of one direction of `entry` (its readers, or its writers) in order until one
  // would block (or a read drained the socket; a read that stops there clears `readable`). An op whose
  // cancel was requested meanwhile (a stop callback on another thread) ends cancelled without its
  // syscall: a read must not take data, nor an error meant for the next reader, for a task that is
  // being cancelled.
  void retry(fd_entry& entry, bool readers) noexcept {
    op_list& waiting = readers ? entry.readers : entry.writers;
    if (waiting.head == nullptr) {
      return;  // the usual writers' case: an event reports EPOLLOUT with every read edge
    }
    if (!enter_calls(entry.record, entry.generation)) {  // closed on another thread, told or not yet
      drop_closed(entry);
      return;
    }
    while (io_op* op = waiting.head) {
      if (op->state.load(std::memory_order_acquire) == io_state::cancel_requested) {
        waiting.pop();
        op->result = -ECANCELED;  // its slot's cancel request then finds it unlinked (cancel())
        finished_.push(*op);
        continue;
      }
      int result = attempt_whole(*op);
      if (result == -EAGAIN) {
        if (readers) {
          entry.readable = false;
        }
        break;
      }
      waiting.pop();
      op->result = result;
      finished_.push(*op);
      if (drained(entry, *op, result)) {
        entry.readable = false;
        break;
      }
    }
    if (waiting.head != nullptr) {
      note_watcher(entry.record, id_);
    }
    leave_calls(entry.record);
  }

  // The entry of `fd` if this reactor watches it (for the descriptor's current generation), else null.
  fd_entry* watched(int fd) noexcept {
    auto index = static_cast<std::size_t>(fd);
    if (index >= fds_.size()) {
      return nullptr;
    }
    fd_entry& entry = fds_[index];
    return entry.registered && entry.generation == generation_in(entry.record) ? &entry : nullptr;
  }

  // The forget requests close_socket() posted from other threads (see "Closed on another thread").
  void take_forget_requests() noexcept {
    for (auto [fd, generation] : forget_requests_.take()) {
      auto index = static_cast<std::size_t>(fd);
      if (index < fds_.size() && fds_[index].registered && fds_[index].generation == generation) {
        drop_closed(fds_[index]);
      }
    }
  }

  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::vector<fd_entry> fds_;
  op_list finished_;  // done (cancelled, or retried after an event), reported at the end of reap()
  requests_from_closes<std::pair<int, std::uint32_t>> forget_requests_;  // (fd, generation)
};

}  // namespace

std::unique_ptr<reactor> make_epoll_reactor() { return std::make_unique<epoll_reactor>(); }

}  // namespace corio::detail
