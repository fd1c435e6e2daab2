#pragma once
// The reactor: the kernel side of one thread's I/O, behind one small interface with two backends
// (uring_reactor.cpp, epoll_reactor.cpp), chosen at start-up (make_reactor, in reactor.cpp).
//
// Design note.
// Contract (DESIGN.md, "The reactor contract"): submit() starts an op, reap() reports finished ops to
//   a sink and never resumes anything; the caller (io_slot) schedules their handles in one batch.
//   cancel() asks the kernel to stop an op early; the op still finishes through reap(), exactly once,
//   with -ECANCELED or with whatever the kernel completed first (an op waiting on a socket's
//   io_source, not in the kernel, finishes at the next reap, which then does not block). An op whose
//   io_request::source is set may be served by that socket's multishot op (io_uring; epoll ignores
//   it) and may finish at once from data already queued there. cancel_all_and_reap() is the shutdown
//   step: when it returns, the kernel holds no op of this reactor.
// Threads: everything but wake() on the owning thread (one submitter: io_uring's SQ is single-producer);
//   wake() from any thread, and it may race with the owner's reap (an eventfd write).
// Rejected: a wider interface with per-op-kind virtuals (the op kind is data in io_request, and a
//   switch in each backend is shorter than a dozen virtuals); reporting completions by callback
//   inside the kernel wait (the sink is a plain function pointer, called after the wait returns).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include <corio/detail/io_op.hpp>
#include <corio/detail/socket.hpp>
#include <corio/io_backend.hpp>

namespace corio::detail {

/// Receives finished ops from reap() and cancel_all_and_reap().
struct completion_sink {
  void (*finish)(void* context, io_op& op) noexcept;
  void* context;
  void operator()(io_op& op) const noexcept { finish(context, op); }
};

class reactor {
 public:
  virtual ~reactor() = default;

  /// Starts `op`. Returns true if it finished at once (epoll: the syscall did not block; op.result is
  /// set and nothing is queued), false if it will finish through reap().
  virtual bool submit(io_op& op) noexcept = 0;

  /// Owning thread: the socket let go of `source`, homed here (io_source.hpp).
  virtual void release(io_source&) noexcept {}
  /// Owning thread, just before the socket `fd` is closed there: ends the ops this reactor keeps
  /// waiting on it with -ECANCELED (epoll: the fd's waiters; io_uring keeps them on the socket's
  /// io_source, whose release() ends them).
  virtual void forget(int) noexcept {}
  /// A thread closing `fd` that is not this reactor's, just before the close, under registry_mutex()
  /// (fd_records.hpp, "Watchers"): queues what ends the requests this reactor holds on that socket
  /// (the one of `generation`), which it does at its next reap; the caller then wakes it.
  virtual void forget_elsewhere(int fd, std::uint32_t generation) noexcept = 0;

  /// This reactor's id in the registry and in fd_record::watchers (fd_records.hpp).
  std::uint32_t id() const noexcept { return id_; }

  /// Whether submit(op) would serve `op` from its socket's multishot state (io_source.hpp), which
  /// must then be homed at this reactor (claim_home).
  virtual bool serves_from_source(const io_op&) const noexcept { return false; }

  /// Whether a socket's home keeps a multishot request armed for ops like `op` (accepts; reads with
  /// CORIO_URING_MULTISHOT=all): one that takes what arrives whether or not a task asked, so another
  /// executor's single-shot op on the socket would wait for what the home already took.
  virtual bool keeps_multishot(const io_op&) const noexcept { return false; }

  /// Whether submit(op), called next, would issue `op` as one kernel request that a timeout can be
  /// linked to; if so and op.link_deadline is set, submit links one at op.deadline (io_op.hpp).
  virtual bool can_link_deadline(const io_op&) const noexcept { return false; }

  /// Asks for `op` (submitted here, not yet reported) to stop early. It is still reported by reap().
  virtual void cancel(io_op& op) noexcept = 0;

  /// Submits what is queued and waits up to `timeout` (none: no limit; zero: do not block) for at
  /// least one completion or a wake(); reports the finished ops to `sink`, taking at most `limit`
  /// kernel events (CQEs, epoll events) from the kernel. The bound is on events, not ops: an op
  /// cancelled here, or a socket event that readies a reader and a writer, may go past it. What is
  /// left stays in the kernel (the CQ ring, epoll's ready list) and makes the next reap return at once.
  virtual void reap(completion_sink sink, std::optional<std::chrono::nanoseconds> timeout,
                    std::size_t limit) noexcept = 0;

  /// Any thread: makes a reap() in progress, or the next one, return promptly.
  virtual void wake() noexcept = 0;

  /// Cancels every op in flight and waits until the kernel let go of each, reporting each to `sink`.
  virtual void cancel_all_and_reap(completion_sink sink) noexcept = 0;

  virtual io_backend kind() const noexcept = 0;

  /// Completions of multishot operations taken so far (io_uring's sockets with an io_source).
  virtual std::uint64_t multishot_completions() const noexcept { return 0; }
  /// Linked timeouts issued so far (io_uring); for tests.
  virtual std::uint64_t linked_timeouts() const noexcept { return 0; }
  /// Sockets in the reactor's registered file table now (io_uring); for tests.
  virtual std::size_t registered_files() const noexcept { return 0; }

 protected:
  std::uint32_t id_ = 0;  // enroll()ed by each backend's constructor, withdrawn by its destructor
};

/// Creates a reactor on the calling thread (it becomes the owning thread). `requested` automatic
/// resolves once per process (CORIO_BACKEND, else io_uring if a ring can be set up, else epoll); the
/// first reactor set up logs what it uses and why; naming a backend that cannot be set up throws
/// std::system_error (and logs nothing).
std::unique_ptr<reactor> make_reactor(io_backend requested, bool thread_bound);

/// The two backends (uring_reactor.cpp, epoll_reactor.cpp). Both throw std::system_error on failure.
std::unique_ptr<reactor> make_uring_reactor(bool thread_bound);
std::unique_ptr<reactor> make_epoll_reactor();

/// 0 if an io_uring can be set up here, else the errno io_uring_setup failed with.
int probe_io_uring() noexcept;

}  // namespace corio::detail
