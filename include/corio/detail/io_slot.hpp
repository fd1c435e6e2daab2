#pragma once
// Where an event loop or runtime worker keeps its reactor: created on the first I/O of its thread,
// it becomes the thread's idle wait, and it is shut down before the executor destroys frames.
//
// Design note.
// Purpose: one reactor per loop and per worker (one ring per thread keeps io_uring's submission queue
//   single-producer), plugged into the executor through its parker, the narrowest seam there is: once
//   the reactor exists, parker::park() blocks in the reactor's wait (completions are reaped and
//   scheduled there, with the next timer deadline as timeout) and parker::wake() writes the reactor's
//   eventfd. A thread that never does I/O keeps its futex and pays nothing.
// One loop turn: drain the queue of cross-thread cancel requests (each becomes an ASYNC_CANCEL or an
//   unlink), then one submit-and-wait (io_uring) or epoll_wait, then the finished ops' handles go to
//   the executor in one schedule_batch (one queue operation and one notification for N completions).
//   poll() is the same turn with a zero timeout; executors call it (a worker: maintain()) so a busy
//   thread still reaps I/O and finds what other threads queued for it. maintain() skips it when a
//   park already turned the reactor since the last tick, or while tasks the reactor delivered may
//   still wait in the caller's queue (it delivered more than the ticks since, and the queue is not
//   empty). Each skipped poll is one io_uring_enter or epoll_wait fewer, and the next turn submits
//   and reaps for the whole batch the last one delivered: polled every tick, a worker whose queue
//   stays full of I/O tasks (the echo at 500 clients never parks) entered the kernel every 61 tasks,
//   5-20x as often as a plain liburing loop.
//   A completion still waits a bounded time for a busy worker: the count decays by a tick's tasks per
//   tick, whatever ran, and is at most a queue's capacity plus a tick (6 ticks of 61 for 256).
// Reap bound: a turn takes from the kernel no more completions than its executor's run queue has
//   room for (a worker's local queue; a park: the slot's reap_limit, the queue's capacity; a poll or
//   maintain: the room the caller passes). Ready sockets beyond that stay in the kernel, where they
//   cost nothing, instead of overflowing the local queue into the shared injection queue and being
//   taken back from it (at 300 busy connections that round trip cost ~10% of the worker's user time).
//   The epoll backend takes at most 64 events a turn besides (epoll_reactor.cpp, "Turn size").
// Multishot (io_uring): a socket's accepts (and, with CORIO_URING_MULTISHOT=all, reads) may be
//   served by one multishot op that keeps its completions in the reactor between operations
//   (io_source.hpp); by default a stream's reads are single-shot on the registered file that state
//   holds. That state stays in the reactor that created it, its home; route() finds the home with
//   claim_home() (io_source.hpp), which creates the state homed here on a socket's first such
//   operation, with a CAS, so several tasks on several workers accepting on one listener at once
//   agree on one home. An exclusive slot (every task its executor resumes runs on its thread: an
//   event loop, the worker of a one-worker runtime) serves a socket homed elsewhere with -EXDEV
//   (reported as net::errc::served_by_another_reactor). In a runtime of several workers tasks are
//   stolen between threads, so an accept or read on a socket homed at another worker of the same
//   runtime is handed off to that worker's slot (hand_off(): a Treiber stack `handed_`, pushed with
//   a seq_cst CAS, then unpark_if_parked(), the same Dekker pair as the cancel queue); that slot
//   takes it at its next turn (take_handed_off(): CAS queued -> in_flight, submit, register the
//   op's stop callback) and schedules the task when it finishes, from its own thread, so the task
//   moves to the socket's home worker and its next operations there are local. A handed-off op pins
//   its socket's io_source (one more owner: io_source.hpp, "Lifetime") and the home reads it
//   through the pin (io_op::pinned), never through the socket object, which may be destroyed while
//   the op waits in the queue. A send uses its stream's state (its registered file) on the home's
//   thread only, and goes out on the descriptor elsewhere (a stream's writer may run on another
//   worker while the home reads the state). A socket homed in another executor's reactor is served
//   single-shot, unless its home keeps a multishot request on it for the op's kind (accepts; reads
//   with CORIO_URING_MULTISHOT=all), which would take what the single-shot op waits for: that gets
//   -EXDEV, as on an exclusive slot. One whose home is shutting down gets -ECANCELED.
//   Hand-off queue shutdown: shutdown() swaps in a closed marker; a hand-off that finds it finishes
//   the op at once with -ECANCELED (the home worker is gone); ops taken by the swap are marked done,
//   not scheduled, like every op in flight at shutdown (their frames are destroyed next).
// Out of descriptors: a reactor needs descriptors of its own (a ring, or an epoll instance, and an
//   eventfd), so a worker whose first I/O comes while the process is out of them cannot make one
//   (a server's idle worker meeting its first connection in an EMFILE storm). Its op is then handed
//   off to a sibling worker of the same runtime that has a reactor (route(), stand_in()), exactly as
//   an op on a socket homed there: the task moves to that worker. Only with no such sibling (an event
//   loop, a one-worker runtime, or no worker has done I/O yet) does the op fail with EMFILE/ENFILE,
//   and the next op tries to make the reactor again. The siblings are fixed before any worker runs
//   (set_siblings); a sibling's reactor is seen through its atomic backend_, published after it exists.
// Release: a socket let go of on a worker other than its home (a task stolen after its last read)
//   must not touch the home reactor's state, and its source may hold a registered file and kernel
//   memory until the home releases it. release_io_source() hands it to the home: hand_off_release()
//   pushes it on `releases_` (the hand-off queue's protocol and closed marker) and the home releases
//   it at its next turn, so nothing waits for the runtime's end. A home that has shut down refuses it
//   and its reactor's teardown frees it (uring_source.cpp, "Release from another thread").
// Threads: submit(), link_deadline(), poll(), shutdown() and the park on the owning thread (the loop's or worker's);
//   request_cancel() (via a stop callback) and wake() from any thread; hand_off() and
//   hand_off_release() from another worker of the same runtime.
// Cancel queue: an intrusive Treiber stack of io_ops (`cancels_`): pushed with a release CAS by stop
//   callbacks, taken whole with an acquire exchange by the owning thread (see io_op.hpp for the op
//   states that make a completion and a cancel request meet safely).
// Shutdown (shutdown(), run before the executor destroys frames: at the end of a worker's thread, and
//   in ~event_loop before its roots are destroyed), in order:
//   1. take the cancel queue (ops cancelled but not yet handed to the reactor); close the hand-off
//      and release queues, and release the sources queued there;
//   2. the reactor cancels every op still in flight (io_uring: ASYNC_CANCEL_ANY) and waits until the
//      kernel has posted a completion for each: from then on the kernel holds no pointer into any frame
//      or buffer; epoll just unlinks (its kernel side holds no user memory);
//   3. every such op is marked done but not scheduled: its frame is about to be destroyed suspended;
//   4. the parker goes back to its futex; the reactor object (its eventfd) stays until the slot is
//      destroyed, so a stop callback racing with the shutdown can still wake it harmlessly.
// Rejected: one reactor thread for the whole runtime (an extra thread, a hand-off per completion, and
//   no DEFER_TASKRUN); creating the reactor eagerly (every loop would pay a ring it may never use, and
//   the lab's post/spawn numbers would move for nothing); closing the ring to cancel (the kernel
//   finishes cancellation asynchronously after close() returns, so a frame could be written after free).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include <corio/detail/executor.hpp>
#include <corio/detail/io_op.hpp>
#include <corio/detail/parker.hpp>
#include <corio/io_backend.hpp>

namespace corio::detail {

class reactor;
struct io_source;

class io_slot final : private park_backend {
 public:
  /// `thread_bound`: every call but wake()/request_cancel() comes from one thread for the slot's life
  /// (runtime workers). Lets io_uring use SINGLE_ISSUER + DEFER_TASKRUN; an event loop, which may be
  /// run and destroyed on different threads, gets a ring without them. `reap_limit`: the most kernel
  /// completions one turn takes (the owner's run-queue capacity; SIZE_MAX for a queue that grows).
  io_slot(parker& parker, executor& owner, io_backend requested, bool thread_bound, std::size_t reap_limit) noexcept
      : parker_(parker),
        owner_(owner),
        requested_(requested),
        thread_bound_(thread_bound),
        exclusive_(!thread_bound),
        reap_limit_(reap_limit) {}
  ~io_slot();
  io_slot(const io_slot&) = delete;
  io_slot& operator=(const io_slot&) = delete;

  enum class submitted : std::uint8_t {
    finished,    // at once: op.result is set, nothing holds the op
    in_flight,   // this slot's reactor holds it: the caller registers its stop callback
    handed_off,  // another worker's slot holds it (and registers the stop callback): touch nothing
  };

  /// Owning thread. Starts `op` here (creating the reactor on first use) or hands it to its socket's
  /// home slot. Throws std::system_error if the reactor cannot be created, unless for want of
  /// descriptors: the op then goes to a sibling that has a reactor (stand_in), or finishes with
  /// -EMFILE or -ENFILE. `awaiter` owns `op`: a home slot that takes a handed-off op registers its stop
  /// callback through it.
  submitted submit(io_op& op, io_awaiter& awaiter);

  /// Owning thread, just before submit(op) (io_op.hpp, "Linked deadlines"). If the reactor will issue
  /// `op` as one plain request that a timeout can be linked to (io_uring: not a stream's read or an accept), stores
  /// `deadline` in op and returns true; otherwise returns false and leaves op as it was, save for
  /// dropping a source that submit() would drop too. Creates the reactor on first use (may throw, as
  /// submit() does).
  bool link_deadline(io_op& op, std::chrono::steady_clock::time_point deadline);

  /// Any thread. The stop callback path of io_op.hpp's state diagram.
  void request_cancel(io_op& op) noexcept;

  /// A worker of the same executor (shares_executor_with), for a socket homed here that it let go of:
  /// queues `source` for this slot to release at its next turn (see "Release"). False if this slot
  /// has shut down: the caller then leaves it to the reactor's teardown.
  bool hand_off_release(io_source& source) noexcept;

  /// Owning thread, just before the socket `fd` is closed on it: the ops its reactor keeps waiting on
  /// that socket end with -ECANCELED (closing a socket under a pending operation is a misuse; this makes
  /// it an error for that operation instead of a wait that never ends).
  void forget(int fd) noexcept;

  /// Owning thread. The id of this slot's reactor in the reactor registry, or 0 if it has none yet.
  std::uint32_t reactor_id() const noexcept;

  /// Whether `other` is a slot of the same executor (another worker of one runtime, or this one).
  /// Decided by address, without reading `other`: a closing socket's home may be an event loop being
  /// destroyed on another thread, while siblings live as long as their runtime.
  bool shares_executor_with(const io_slot& other) const noexcept {
    return &other == this || std::find(siblings_.begin(), siblings_.end(), &other) != siblings_.end();
  }

  /// Owning thread. One loop turn without blocking, if any op is in flight, or another thread queued
  /// anything for this slot (a hand-off, a cancel request, a release), taking at most `room`
  /// completions (the free room in the caller's run queue). Not only park() may find those queues: an
  /// op that completed while its cancel request was on the way is delivered by the request (see
  /// turn()), and a thread that never runs dry never parks.
  void poll(std::size_t room) noexcept {
    if (has_work()) {
      turn(std::chrono::nanoseconds::zero(), room);
    }
  }

  /// Owning thread. Whether an op is in flight or another thread queued anything for this slot.
  bool has_work() const noexcept {
    return pending_ != 0 || handed_.load(std::memory_order_relaxed) != nullptr ||
           cancels_.load(std::memory_order_relaxed) != nullptr || releases_.load(std::memory_order_relaxed) != nullptr;
  }

  /// Owning thread. Whether an operation is in flight (submitted and not yet delivered).
  bool has_pending() const noexcept { return pending_ != 0; }

  /// Owning thread, on a busy executor's maintenance tick, `ticks` tasks after the previous one, with
  /// `queued` tasks in its run queue: poll(), unless the reactor already had a turn (a park) since the
  /// previous call, or tasks it delivered may still be queued (see "One loop turn"). A thread that
  /// parks between ticks pays no extra system call, and one that never parks one per batch.
  void maintain(std::size_t room, std::size_t ticks, std::size_t queued) noexcept {
    undrained_ = std::min(undrained_ > ticks ? undrained_ - ticks : 0, queued);
    if (turns_ != turns_at_maintain_) {
      turns_at_maintain_ = turns_;
      return;
    }
    if (undrained_ != 0) {
      return;
    }
    poll(room);
    turns_at_maintain_ = turns_;
  }

  /// The shutdown steps above. Idempotent; the slot accepts no more operations afterwards.
  void shutdown() noexcept;

  /// Before any worker runs: the slots of every worker of this slot's runtime (this one included),
  /// which stand in for it while it cannot make its reactor (see "Out of descriptors").
  void set_siblings(std::span<io_slot* const> siblings) noexcept { siblings_ = siblings; }

  /// Owning thread, before the first I/O. Whether every task this slot's executor resumes runs on this
  /// slot's thread (an event loop; a one-worker runtime's worker): only then may a socket keep its
  /// multishot state (io_source.hpp) in this slot's reactor.
  void set_exclusive(bool exclusive) noexcept { exclusive_ = exclusive; }

  /// Owning thread. Completions the reactor took from multishot operations so far (0 on epoll).
  std::uint64_t multishot_completions() const noexcept;
  /// Owning thread. Linked timeouts the reactor issued so far (0 on epoll); for tests.
  std::uint64_t linked_timeouts() const noexcept;
  /// Owning thread. Sockets in the reactor's registered file table now (0 on epoll).
  std::size_t registered_files() const noexcept;
  /// Owning thread. Operations other workers handed to this slot so far; for tests.
  std::uint64_t handed_off_here() const noexcept { return handed_off_here_; }

  /// The backend of the reactor, or io_backend::automatic if none was created yet. Thread-safe.
  io_backend backend() const noexcept { return backend_.load(std::memory_order_acquire); }

  /// Makes `slot` the calling thread's slot (the one I/O awaited there uses) for this scope.
  class scope {
   public:
    explicit scope(io_slot& slot) noexcept;
    ~scope();
    scope(const scope&) = delete;
    scope& operator=(const scope&) = delete;

   private:
    io_slot* previous_;
  };

 private:
  /// Creates the reactor on first use. Returns 0, or -EMFILE / -ENFILE when the process is out of
  /// descriptors (transient: the caller's op fails with it, and the next op tries again); any other
  /// failure (no io_uring where it was asked for by name, a bad CORIO_BACKEND) throws std::system_error.
  int ensure_reactor() { return reactor_ != nullptr ? 0 : create_reactor(); }
  int create_reactor();
  /// Where `op` runs: this slot, or the home slot of its socket's multishot state (see "Multishot";
  /// the source is dropped from ops that run here without it); null if it cannot run (op.result is
  /// set). Creates the reactor on first use.
  io_slot* route(io_op& op);
  /// route() while this slot has no reactor and cannot make one: a sibling that has a reactor and may
  /// serve `op` (its socket's home, or any sibling for a socket homed nowhere), or null.
  io_slot* stand_in(io_op& op) noexcept;
  /// Another worker's thread: queues `op` (owned by `awaiter`) for this (its socket's home) slot and wakes it.
  submitted hand_off(io_op& op, io_awaiter& awaiter) noexcept;
  /// hand_off(): pins the op's io_source (io_op::pinned); unpin_source() lets go of it once the home
  /// took the op or ended it.
  static void pin_source(io_op& op) noexcept;
  static void unpin_source(io_op& op) noexcept;
  void drain_handed_off() noexcept;
  void take_handed_off(io_op& op) noexcept;
  void park(std::optional<std::chrono::nanoseconds> timeout) noexcept override;
  void wake() noexcept override;
  void turn(std::optional<std::chrono::nanoseconds> timeout, std::size_t limit) noexcept;
  void drain_cancel_requests() noexcept;
  void drain_releases() noexcept;
  /// Releases each source of a list taken from `releases_` (linked through next_released).
  void release_each(io_source* queued) noexcept;
  void deliver(io_op& op) noexcept;
  void flush() noexcept;

  static constexpr std::size_t batch_capacity = 256;

  parker& parker_;
  executor& owner_;
  const io_backend requested_;
  const bool thread_bound_;
  bool exclusive_;
  const std::size_t reap_limit_;
  reactor* reactor_ = nullptr;  // owning thread; read by wake() only after an op exists
  std::atomic<io_backend> backend_{io_backend::automatic};
  std::size_t pending_ = 0;  // submitted and not yet delivered; owning thread
  std::uint64_t turns_ = 0;  // loop turns so far; owning thread
  std::uint64_t turns_at_maintain_ = 0;
  std::size_t undrained_ = 0;  // tasks delivered that may still be queued (maintain()); owning thread
  bool shut_down_ = false;
  std::atomic<io_op*> cancels_{nullptr};
  std::atomic<io_op*> handed_{nullptr};  // ops other workers handed to this slot, or closed_marker()
  std::atomic<io_source*> releases_{nullptr};  // sources let go on other workers, or a closed marker
  std::uint64_t handed_off_here_ = 0;
  std::span<io_slot* const> siblings_;  // set before the workers run; empty outside a runtime
  std::size_t batch_size_ = 0;
  std::coroutine_handle<> batch_[batch_capacity];
};

/// The slot whose reactor I/O awaited on this thread uses, or null.
extern thread_local constinit io_slot* current_io_slot;

}  // namespace corio::detail
