#pragma once
// The handle a socket keeps to its state in an io_uring reactor (an io_source, src/io/uring_source.cpp).
//
// Design note.
// Purpose: on io_uring, a tcp_listener's accepts are served by one multishot accept, and a tcp_stream's
//   reads and writes go through a registered file, its reads single-shot or (CORIO_URING_MULTISHOT=all)
//   from one multishot recv into the reactor's provided-buffer ring. A multishot op's completions may
//   arrive while nobody awaits; the io_source keeps them (buffer ids, descriptors, EOF or an error,
//   in order) until the next operation takes them.
// Lifetime: owners counted in the source: the socket's handle, the reactor side (the home reactor,
//   which lets go once the socket was released and the kernel holds nothing of it; or whoever finds
//   it orphaned), and each op handed to the home by another worker, from the hand-off until the
//   home took it (io_op::pinned); the last to let go frees it. A handed-off op reads the source
//   through its own pin, not through the socket's pointer: its socket object may be destroyed under
//   it while it waits in the home's queue (a misuse, but not one that may touch freed memory). A
//   close releases the source but the handle keeps its part until the socket object is destroyed or
//   given another socket: an operation started on another thread as the socket closes still reads
//   the source's atomics through the socket's pointer (its home, its `closing` flag) and must find
//   them allocated (a user trial saw the home free it under a route on another worker). Once the
//   reactor side let go, the home slot is cleared, so such an operation ends -ECANCELED instead of
//   being handed to it.
// Threads: an io_source belongs to the reactor that keeps it (its home); its state is used only on
//   that reactor's thread. Other threads touch two atomics: the socket's pointer to it and its home
//   slot. claim_home() is how an operation finds the home, on any worker: it creates the source
//   (homed at the caller) with a CAS on the socket's pointer if there is none, and re-homes a source
//   whose reactor is gone with a CAS on the home slot, so several tasks on several workers accepting
//   on one listener at once agree on one source and one home. The home is published (release) after
//   the fields the adopting reactor reads; a reactor being torn down clears it and then, last, marks
//   the source orphaned (acq_rel), and only an orphaned source may be claimed again (claim_home reads
//   that state with acquire, so the teardown's writes are behind it).
//   release_io_source() from any thread, once per socket (later calls do nothing): off the owning
//   thread it only shuts the socket down and marks the source released (an atomic the reactor
//   reads; uring_source.cpp has the protocol).
// Closing: the socket's close() and an operation's claim_home() meet on the socket's pointer. A close
//   that finds no source installs closed_io_source() with a CAS, so no source is created for the
//   socket after its close; one that finds a source (a CAS that failed) releases it. A source
//   created after a close found none would have registered the closed socket's file and kept it
//   open, its read waiting forever, and its later release would have shut down whatever socket had
//   reused the number by then (a user trial, on a plain thread closing a stream as its first read
//   started).
// Rejected: a socket-owned state the reactor points into (closing the socket while the kernel holds
//   the multishot would leave the reactor a dangling pointer); a map from descriptors to states in the
//   reactor (a look-up per completion).
#include <atomic>

#include <corio/detail/io_op.hpp>

namespace corio::detail {

struct io_source;

/// The socket closes: cancels the source's multishot in the kernel, gives queued buffers back, closes
/// queued accepted descriptors, and lets the reactor side go once the kernel holds nothing of it.
/// Only the first call per source does anything.
void release_io_source(io_source* source) noexcept;

/// The socket's handle lets go of `source` for good (after release_io_source); frees it if the
/// reactor side already did.
void drop_socket_side(io_source* source) noexcept;

class io_slot;

/// What a socket's pointer holds once it was closed with no source: a source that is closing and has
/// no home, so that claim_home() refuses it and submit_with_source() ends the op -ECANCELED. Never
/// released or freed.
io_source* closed_io_source() noexcept;

/// Any thread: the slot whose reactor keeps (or is to adopt) the state behind `pointer`. With no
/// state yet, creates one homed at `here`; with a state whose reactor is gone, re-homes it at `here`.
/// `kind` and `socket` describe the socket. Null: the home reactor is being torn down (its executor is
/// shutting down); the operation cannot be served.
io_slot* claim_home(std::atomic<io_source*>& pointer, io_kind kind, socket_id socket, io_slot& here);

/// Owns the io_source pointer of one socket (null until an io_uring reactor creates it), and the
/// socket's part of the source (see "Lifetime"). Move-only.
class io_source_ref {
 public:
  io_source_ref() noexcept = default;
  io_source_ref(io_source_ref&& other) noexcept : source_(other.take()) {}
  io_source_ref& operator=(io_source_ref&& other) noexcept {
    if (this != &other) {
      reset();
      source_.store(other.take(), std::memory_order_relaxed);
    }
    return *this;
  }
  ~io_source_ref() { reset(); }

  /// The socket closes: with operations parked on the source, its reactor ends them with -ECANCELED
  /// (release()). The pointer stays until reset(); with no source, it becomes closed_io_source()
  /// (see "Closing").
  void close() noexcept {
    io_source* source = nullptr;
    if (!source_.compare_exchange_strong(source, closed_io_source(), std::memory_order_acq_rel,
                                         std::memory_order_acquire)) {
      release_io_source(source);  // does nothing for closed_io_source() (closed twice)
    }
  }
  /// Releases the source and lets go of the socket's part of it.
  void reset() noexcept {
    io_source* source = take();
    if (source != nullptr && source != closed_io_source()) {
      release_io_source(source);
      drop_socket_side(source);
    }
  }
  /// Where an operation's io_request::source points.
  std::atomic<io_source*>* slot() noexcept { return &source_; }

 private:
  io_source* take() noexcept { return source_.exchange(nullptr, std::memory_order_acquire); }

  std::atomic<io_source*> source_{nullptr};
};

}  // namespace corio::detail
