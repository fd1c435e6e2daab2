#pragma once
// The io_uring backend of the reactor; the design note is in uring_reactor.cpp (ring, submission,
// wake-up, shutdown) and uring_source.cpp (multishot accept and recv, the provided-buffer ring).
#include <liburing.h>
#include <sys/eventfd.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "io/fd_records.hpp"
#include "io/reactor.hpp"

namespace corio::detail {

/// The user_data of a multishot op's CQEs: its io_source's address | this bit (both are 8-aligned).
inline constexpr std::uint64_t uring_source_tag = 2;

class uring_reactor final : public reactor {
 public:
  explicit uring_reactor(bool thread_bound);
  ~uring_reactor() override;

  bool submit(io_op& op) noexcept override;
  void cancel(io_op& op) noexcept override;
  void reap(completion_sink sink, std::optional<std::chrono::nanoseconds> timeout, std::size_t limit) noexcept override;
  void wake() noexcept override;
  void cancel_all_and_reap(completion_sink sink) noexcept override;
  io_backend kind() const noexcept override { return io_backend::io_uring; }
  std::uint64_t multishot_completions() const noexcept override { return multishot_completions_; }
  bool serves_from_source(const io_op& op) const noexcept override {
    return op.source != nullptr && multishot_ && op.kind != io_kind::send && (op.kind == io_kind::accept || op.length != 0);
  }
  bool keeps_multishot(const io_op& op) const noexcept override {
    return serves_from_source(op) && (op.kind == io_kind::accept || multishot_reads_);
  }
  /// Single-shot ops without a source. A stream's reads keep the timer path even when single-shot: a
  /// linked timeout per read cost the echo 11% of its requests/s at 300 x 128 B (the kernel arms and
  /// cancels a timer and posts a second CQE per read), the thread's own timer about nothing.
  bool can_link_deadline(const io_op& op) const noexcept override { return !serves_from_source(op); }
  std::uint64_t linked_timeouts() const noexcept override { return linked_timeouts_; }
  std::size_t registered_files() const noexcept override {
    return fixed_next_ - fixed_free_.size() - fixed_released_.size();
  }

  /// uring_source.cpp.
  void release(io_source& source) noexcept override;
  /// Cancels the requests the kernel holds on `fd` (a socket closed under them), submitted at once,
  /// while the descriptor still names the socket.
  void forget(int fd) noexcept override;
  /// Any thread, under registry_mutex(): keeps a duplicate of `fd` for cancel_closed_elsewhere(), which
  /// also lets go of the socket's io_source if it has one here.
  void forget_elsewhere(int fd, std::uint32_t generation) noexcept override;

 private:
  // uring_reactor.cpp
  io_uring_sqe* next_sqe(unsigned room = 1) noexcept;
  void arm_wake() noexcept;
  /// Reports the ops finished without the kernel, then those of at most `limit` CQEs.
  void report_completions(completion_sink sink, std::size_t limit) noexcept;
  /// `poll_first`: a receive issued again after -EAGAIN (IORING_RECVSEND_POLL_FIRST).
  void prep_single(io_op& op, bool poll_first = false) noexcept;
  /// Every CQE of the op's request is in: issues the rest of a whole transfer, or reports the op.
  void finish(io_op& op, completion_sink sink) noexcept;
  /// Adds `change` to the requests the kernel holds on `fd` (issued +1, CQE seen -1).
  void count_in_kernel(int fd, int change) noexcept {
    auto index = static_cast<std::size_t>(fd);  // -1 (a closed socket's op) lands in the slow path
    if (index < in_kernel_by_fd_.size()) [[likely]] {
      in_kernel_by_fd_[index] += static_cast<std::uint32_t>(change);
    } else {
      count_in_kernel_slow(fd, change);
    }
  }
  void count_in_kernel_slow(int fd, int change) noexcept;
  /// prep_single, arm: the SQE next_sqe() just handed out names `socket`'s descriptor number (see
  /// "Requests that name a descriptor number").
  void list_by_number(io_uring_sqe* sqe, socket_id socket) noexcept;
  /// Queues an ASYNC_CANCEL for `op` whose CQE carries its address (counted in its cqes_due by the caller).
  void send_cancel(io_op& op) noexcept;
  /// Runs `submit` (one of liburing's submissions) inside the enter_calls() brackets of the listed
  /// requests, refusing those whose socket was closed since their op was made.
  template <class Submit>
  void submit_guarded(Submit submit) noexcept {
    if (by_number_.empty()) [[likely]] {
      submit();
      return;
    }
    enter_by_number();
    submit();
    leave_by_number();
  }
  void enter_by_number() noexcept;
  /// Whether the kernel, its SQ head at `head`, has taken the entry prepared at `position` (the SQ's
  /// running count, wrapping).
  static bool taken_by_kernel(unsigned position, unsigned head) noexcept { return static_cast<int>(position - head) < 0; }
  /// Leaves the brackets and forgets the entries the kernel took.
  void leave_by_number() noexcept;
  /// Submits the listed requests now, if any: before a wait, which no bracket may span.
  void submit_by_number() noexcept;
  /// Just issued a request on `fd`, a socket without an io_source: on its first one in the kernel,
  /// notes this reactor as a watcher of the number (fd_records.hpp).
  void note_request_without_source(int fd) noexcept;
  /// The start of a reap, and right after its wait: cancels the requests on sockets closed on other
  /// threads (forget_elsewhere) and lets go of their io_sources (release_closed_elsewhere).
  void cancel_closed_elsewhere() noexcept;
  /// The closing thread, under registry_mutex(), `fd` still open: cancels this ring's requests on the
  /// socket with a synchronous cancel (IORING_REGISTER_SYNC_CANCEL), which any thread may make on a ring
  /// without SINGLE_ISSUER (an event loop's). False where it cannot: the caller takes a duplicate.
  bool cancel_from_here(int fd) noexcept;

  // uring_source.cpp
  /// CORIO_URING_MULTISHOT: which ops may be multishot, and the registered file table.
  void setup_multishot() noexcept;
  /// The provided-buffer ring multishot reads take from; false if the kernel refused it.
  bool setup_buffers() noexcept;
  void teardown_buffers() noexcept;
  bool submit_with_source(io_op& op) noexcept;
  /// Parks `op` on `source` behind the ops already parked there, and takes the oldest back.
  void park(io_source& source, io_op& op) noexcept;
  io_op& unpark_oldest(io_source& source) noexcept;
  bool cancel_parked(io_op& op) noexcept;
  /// Ends every op parked on `source` with -ECANCELED, reported at the next reap.
  void finish_parked(io_source& source) noexcept;
  void finish_here(io_op& op) noexcept;
  void on_source_completion(io_source& source, std::int32_t result, std::uint32_t flags, completion_sink sink) noexcept;
  void arm(io_source& source) noexcept;
  /// Adopts a new (or orphaned) source: takes it orphaned -> live with a CAS, links it, registers a
  /// stream's file, notes this reactor as a watcher of the number. False, touching nothing, if its
  /// socket let go of it first; false, having let go of it, if its socket closed since the CAS
  /// ("Adoption" in uring_source.cpp).
  bool adopt(io_source& source) noexcept;
  /// `fd` was closed on another thread: if this reactor keeps its source and that thread released it,
  /// lets go of it now (release()), instead of at a multishot CQE that may never come.
  void release_closed_elsewhere(int fd) noexcept;
  /// If another thread released `source` (closed its socket) and this reactor has not let go of it
  /// yet, release()s it now, which frees it unless its multishot or a held request still needs it;
  /// returns whether it did.
  bool let_go_if_released_elsewhere(io_source& source) noexcept;
  void cancel_multishot(io_source& source) noexcept;
  /// prep_single: the op's request uses `source`'s socket; counted until its CQE (end_held).
  void hold(io_op& op, io_source* source) noexcept;
  /// The CQE of a held op's request, whose result was `result`: returns the result to report
  /// (-ECANCELED if the socket was closed under it) and lets go of a released source nothing holds.
  std::int32_t end_held(io_op& op, std::int32_t result) noexcept;
  /// Frees a released source once neither its multishot nor an op's request holds it.
  void free_if_unheld(io_source& source) noexcept;
  std::int32_t take(io_source& source, io_op& op) noexcept;
  void recycle(std::uint16_t buffer_id) noexcept;
  void drop_queued(io_source& source) noexcept;
  void unlink(io_source& source) noexcept;
  void detach_all_parked() noexcept;
  bool ring_has_room() const noexcept;
  void setup_fixed_files() noexcept;
  int register_fixed(int fd) noexcept;
  void unregister_fixed(io_source& source) noexcept;
  void use_fixed_file(io_uring_sqe* sqe, const io_source* source) const noexcept;

  io_uring ring_{};
  const bool thread_bound_;  // a runtime worker's ring (SINGLE_ISSUER): nothing touches it off its thread
  int wake_fd_ = -1;
  eventfd_t wake_buffer_ = 0;
  std::size_t in_flight_ = 0;  // ops submitted (or parked on a source) and not yet reported
  std::vector<std::uint32_t> in_kernel_by_fd_;  // requests issued on each descriptor number, CQE not yet seen
  struct closed_socket {
    int fd;    // the number as it was closed
    int kept;  // a duplicate of it, taken before the close; -1: its requests here were cancelled then
  };
  requests_from_closes<closed_socket> closed_elsewhere_;  // sockets closed on other threads
  struct by_number_request {
    io_uring_sqe* sqe;
    socket_id socket;               // the socket the request means
    unsigned position;              // in the SQ's running count (the kernel has taken it once its head passes)
    fd_record* record = nullptr;    // entered, during a submission
    bool refused = false;           // made a NOP: never entered again
  };
  std::vector<by_number_request> by_number_;  // prepared, not yet taken by the kernel
  bool wake_armed_ = false;
  bool draining_ = false;
  bool ring_registered_ = false;
  std::uint64_t linked_timeouts_ = 0;

  // Multishot state (uring_source.cpp).
  bool multishot_ = false;                // multishot ops are allowed (accepts; reads if multishot_reads_)
  bool multishot_reads_ = false;          // CORIO_URING_MULTISHOT=all, and the kernel took the buffer ring
  io_uring_buf_ring* buffer_ring_ = nullptr;
  std::byte* buffers_ = nullptr;
  unsigned buffer_count_ = 0;             // a power of two
  unsigned buffers_free_ = 0;             // in the ring now
  io_source* sources_ = nullptr;          // every source of this reactor (intrusive list)
  std::vector<io_source*> source_by_fd_;  // the same sources by descriptor number (null: none)
  std::size_t armed_ = 0;                 // sources whose multishot the kernel holds
  io_op* finished_here_ = nullptr;        // parked ops finished without a CQE (cancelled), linked by next
  std::uint64_t multishot_completions_ = 0;

  // Registered files (uring_source.cpp): streams with a source send and receive through a slot of a
  // sparse table instead of their descriptor (no file look-up and reference count per request).
  unsigned fixed_capacity_ = 0;          // 0: no table (the kernel refused it)
  unsigned fixed_next_ = 0;              // slots below this were handed out once
  std::vector<unsigned> fixed_free_;     // handed out and given back
  struct released_slot {
    unsigned index;
    unsigned position;  // the last SQ entry prepared before its release: reusable once the kernel took it
  };
  std::vector<released_slot> fixed_released_;  // given back, not yet reusable (uring_source.cpp)
};

}  // namespace corio::detail
