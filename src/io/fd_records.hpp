#pragma once
// What a socket's close must tell the reactors: a process-wide record per descriptor number, and
// the registry of live reactors; close_socket() (fd_records.cpp) is their one user outside the
// reactors.
//
// Design note.
// Generation: close_socket() bumps the number's generation before close(). The epoll backend keeps
//   per number whether it registered the socket with its epoll set, and a stale generation tells it
//   that socket is gone (epoll_reactor.cpp, "The fd table").
// Watchers: the ids of the reactors that left a request waiting on the number (epoll: an op parked
//   for readiness; io_uring: the first request in the kernel on it, or the socket's io_source), up
//   to `watcher_slots` of them: a stream's reader and writer may wait on two workers at once, and a
//   close must reach both (with one slot, the writer's note hid the reader's, whose read then
//   waited until something else woke its worker). Each reactor's thread notes itself again each
//   time it leaves a request waiting: a store into the slot it holds, else a CAS into a free one;
//   with every slot taken by others it marks the record `crowded` instead. close_socket() takes the
//   mark and each slot (exchanges); it tells each reactor in a slot, or, if the record was crowded,
//   every live reactor, so none that waits on the socket is ever left out (a reactor with nothing
//   on the socket finds nothing to end: epoll has no entry at the closed generation, io_uring's
//   cancel on the duplicate matches no request). The closing thread's own reactor is skipped (its
//   forget() already ended its requests); for each other one, the closing thread calls its
//   forget_elsewhere() under the registry mutex, before the close, and wakes it: the reactor then
//   ends its requests on the socket at its next reap (epoll: the waiters of an entry still at the
//   closed socket's generation; io_uring: an ASYNC_CANCEL on a duplicate of the descriptor taken
//   before the close, so the cancel names that socket's file whatever the number names later). A
//   reactor that left no request on the number since it was last cleared is never disturbed.
// Registry: live reactors with their ids, under one mutex, which also guards each reactor's list
//   of requests from other threads. Touched by reactor construction and destruction, closes that
//   find a foreign watcher, and reactors taking such requests: never per operation. A reactor leaves
//   it before it closes its wake-up eventfd, so a close never wakes a destroyed reactor. Ids count
//   up from 1 (0: no watcher) and are not reused before 2^32 reactors, so a request meant for a
//   destroyed reactor finds nobody instead of a stranger.
// Threads: the records are atomics; everything else is under the mutex. Reading a generation to
//   tell a stale registration is relaxed (a number is reused only after the close that bumped its
//   generation returned). A socket keeps the generation its number had when it was opened
//   (socket_fd), and each of its operations carries it, so an operation made before a close and
//   started after it is told from one on the number's next socket.
// Calls: a reactor thread brackets its system calls on a number (epoll: a submit's attempt, its
//   epoll_ctl and its watcher note; an event's retries and note) with enter_calls() and leave_calls(),
//   naming the generation of the socket it means. enter_calls() counts the thread in (seq_cst), then
//   refuses if the generation moved on: the socket was closed, or is being closed, since the
//   operation was made, and it ends cancelled without a system call. close_socket() bumps the
//   generation (seq_cst), then waits until no thread is counted in (yielding: every bracketed call is
//   non-blocking, so the wait lasts a system call or two), and only then takes the watcher slots and
//   closes. Of two such threads, one sees the other (both pairs are sequentially consistent): a
//   thread is refused, or the close waits for its bracket to end. So no reactor's system call reaches
//   a number after its socket's close() began (nor the socket that reuses the number), and an op left
//   waiting was noted before the close takes the slots: the note is made inside the bracket, and the
//   close's acquire load of the count reads leave_calls()'s release. This is Go's per-descriptor
//   count of operations in progress (fdMutex), kept per number in the record, which outlives any
//   socket object: two locked instructions per submit or per event, not per operation's lifetime.
//   Notes are release stores and close_socket() takes the mark and the slots with exchanges: a close
//   on a thread that never synchronised with the waiting reactor is ordered after its system calls,
//   as ThreadSanitizer checks (it models a close as a write of the descriptor, and each call on it
//   as a read). io_uring brackets each submission that carries requests naming numbers: the kernel
//   looks a number up when it takes the request, not when the loop prepares it (uring_reactor.cpp,
//   "Requests that name a descriptor number").
// Every number a descriptor can have (0 to 2^31 - 1) has a record: three levels (directories of
//   chunks of records), each allocated on first use and kept for the process's life, like the
//   descriptor table they mirror. Only a failed allocation leaves a number without one (record_of
//   returns null): never marked stale and never reached by a close on another thread.
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <new>
#include <vector>

#include <corio/detail/io_op.hpp>

namespace corio::detail {

class reactor;

inline constexpr std::size_t watcher_slots = 4;

// One cache line each: neighbouring numbers' counts are written by different workers per system call.
struct alignas(64) fd_record {
  std::atomic<std::uint32_t> generation{0};  // bumped by every close_socket() of the number
  std::atomic<std::uint32_t> calls{0};       // reactor threads inside enter_calls() .. leave_calls()
  std::array<std::atomic<std::uint32_t>, watcher_slots> watchers{};  // reactors with requests on it; 0: free
  std::atomic<bool> crowded{false};  // more reactors noted themselves than there are slots
  // A stream's one reader and one writer (exclusive_claim, include/corio/detail/socket.hpp): 0, or the
  // generation + 1 of the socket whose read (write) is in flight.
  std::atomic<std::uint64_t> reading{0};
  std::atomic<std::uint64_t> writing{0};
};

/// The record of `fd`, created on first use if `create`; null if it was not, or memory ran out.
fd_record* record_of(int fd, bool create) noexcept;

/// The record a socket found for `fd` when it opened (socket_id::record), or, if memory ran out
/// then, record_of(fd, create).
inline fd_record* record_for(int fd, fd_record* found_at_open, bool create) noexcept {
  return found_at_open != nullptr ? found_at_open : record_of(fd, create);
}

inline std::uint32_t generation_in(const fd_record* record) noexcept {
  return record != nullptr ? record->generation.load(std::memory_order_relaxed) : 0;
}

/// The owning thread of reactor `self` (an id, never 0): it leaves a request waiting on the number
/// (epoll: inside enter_calls() .. leave_calls(); see "Calls").
inline void note_watcher(fd_record* record, std::uint32_t self) noexcept {
  if (record == nullptr) {
    return;
  }
  for (auto& slot : record->watchers) {
    if (slot.load(std::memory_order_relaxed) == self) {
      slot.store(self, std::memory_order_release);  // the common case: noted before, published again
      return;
    }
  }
  for (auto& slot : record->watchers) {
    std::uint32_t free = 0;
    if (slot.compare_exchange_strong(free, self, std::memory_order_release, std::memory_order_relaxed)) {
      return;
    }
  }
  record->crowded.store(true, std::memory_order_release);
}

/// A reactor thread, before its system calls on a socket opened at `generation`: false if that socket
/// was closed or is being closed (make no call, and do not call leave_calls()). See "Calls".
inline bool enter_calls(fd_record* record, std::uint32_t generation) noexcept {
  if (record == nullptr) {
    return true;  // memory ran out when the socket was opened: its number is not guarded
  }
  record->calls.fetch_add(1, std::memory_order_seq_cst);
  if (record->generation.load(std::memory_order_seq_cst) == generation) {
    return true;
  }
  record->calls.fetch_sub(1, std::memory_order_release);
  return false;
}

/// After the system calls that enter_calls() let in.
inline void leave_calls(fd_record* record) noexcept {
  if (record != nullptr) {
    record->calls.fetch_sub(1, std::memory_order_release);
  }
}

/// Whether the socket `op` names was closed since the op was made (a relaxed read: see "Calls" for
/// what it cannot see).
inline bool closed_since_opened(const io_request& op) noexcept {
  const fd_record* record = record_for(op.fd, op.record, false);
  return record != nullptr && record->generation.load(std::memory_order_relaxed) != op.generation;
}

/// Adds `self` to the registry and stores its id in `id` (self's own member) under the registry's
/// mutex, where closing threads read it (throws std::bad_alloc); withdraw() removes it.
void enroll(reactor& self, std::uint32_t& id);
void withdraw(reactor& self) noexcept;

/// Guards the reactors' lists of requests from closing threads (held during forget_elsewhere()).
std::mutex& registry_mutex() noexcept;

/// A reactor's list of what closing threads asked of it (fd_records.hpp, "Watchers"): pushed by them
/// in forget_elsewhere(), under registry_mutex(); taken whole by the reactor's own thread, which
/// skips the mutex while a flag says nothing was pushed.
template <class Request>
class requests_from_closes {
 public:
  /// A closing thread, under registry_mutex(). False if memory ran out (the request is dropped).
  bool push(Request request) noexcept {
    try {
      pushed_.push_back(request);
    } catch (const std::bad_alloc&) {
      return false;
    }
    waiting_.store(true, std::memory_order_release);
    return true;
  }

  /// The owning thread (or its destructor, once withdrawn): everything pushed so far.
  std::vector<Request> take() noexcept {
    std::vector<Request> taken;
    if (waiting_.load(std::memory_order_acquire)) {
      std::lock_guard lock(registry_mutex());
      taken.swap(pushed_);
      waiting_.store(false, std::memory_order_relaxed);
    }
    return taken;
  }

 private:
  std::vector<Request> pushed_;        // registry_mutex()
  std::atomic<bool> waiting_{false};  // set by a push, cleared by take() under the mutex
};

}  // namespace corio::detail
