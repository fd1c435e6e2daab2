// A socket's state in the io_uring reactor (uring_reactor.hpp): multishot accept, a registered file
// for streams, and multishot recv from a provided-buffer ring; the socket side is
// include/corio/detail/io_source.hpp.
//
// Design note.
// Which ops (CORIO_URING_MULTISHOT, read when a reactor is made): `accept`, the default, serves a
//   listener's accepts from one multishot accept and a stream's reads with single-shot recvs into the
//   reader's own buffer on the stream's registered file; `all` serves reads from a multishot recv
//   into provided buffers too; `0`, neither (no source, every op on its descriptor). Reads are
//   single-shot by default because that measured faster for request/response traffic on one worker
//   (the echo at 50 x 128 B and 500 x 1000 B, runs alternating: 2-6% more requests/s than
//   multishot, level with the plain liburing server): a multishot read waits parked anyway, then
//   pays the kernel's buffer selection and a copy out of the provided buffer, where a single-shot
//   recv lands in the reader's buffer. Multishot reads still win where data arrives while nobody
//   reads (it waits in the ring, not in the socket), so they stay one setting away.
// Purpose of multishot: one op per socket instead of one SQE per accept or read. Its CQEs (user_data:
//   the io_source's address | uring_source_tag, no look-up) go to the op parked on the source, or,
//   if none waits, into the source's queue, which the next accept or read_some takes from without
//   entering the kernel.
// Buffers: one provided-buffer ring per reactor (group 0), `buffer_count_` buffers of `buffer_size`,
//   mmap'd and registered with liburing 2.3's io_uring_register_buf_ring. A recv CQE names a buffer
//   id; a read copies out of it and gives it back to the ring at once, or keeps the rest (offset) for
//   the next read. EOF and errors are queued behind the data, so they are delivered once, in order.
// Ring runs dry: the kernel ends the multishot with -ENOBUFS; the parked read (if any) becomes a
//   plain recv into its own buffer, and a later read re-arms once the ring has room again
//   (ring_has_room: an eighth of the buffers free), so a reactor short of buffers degrades to
//   single-shot reads and loses nothing.
// Accept: a queue beyond accept_queue_bound cancels the multishot (the CQEs already posted are still
//   queued, none is lost); the next accept that finds the queue empty re-arms it. An error CQE
//   (EMFILE, ...) is queued like a descriptor and reported by one accept; the multishot ends and the
//   next accept re-arms it. Except an EMFILE under a raised limit: the kernel takes RLIMIT_NOFILE
//   when it prepares an accept and a multishot keeps that one for its whole life, so a limit raised
//   since it was armed (a server that raises it after its first accept, or prlimit from outside)
//   still ended it with EMFILE, far below the new limit (a user trial). The source records the soft
//   limit it armed under (one getrlimit per arm); an EMFILE that ends a multishot armed under a
//   lower limit than the current one is dropped, and the multishot re-armed under the new one.
// Cancelled multishots (accept and recv): a multishot's -ECANCELED is never queued. corio cancelled
//   it (a queue over its bound, shutdown), a close did (the source is then gone), or the kernel did
//   because the thread that submitted it exited (an event loop run on a thread that is gone since:
//   its next run's first accept failed with operation_canceled, a user trial). None of these is news
//   for a reader or an acceptor, so the next op re-arms it, as after any other end.
// Registered files: a stream's source also takes a slot in the reactor's sparse registered file table
//   (one io_uring_register_files_update per connection); the multishot recv, single-shot reads and the
//   stream's sends then name the slot (IOSQE_FIXED_FILE), so the kernel skips the file look-up and
//   reference count per request. The table holds a reference to the file, so release() takes the slot
//   back before the socket's close() (a closed descriptor whose file the table still holds would keep
//   the connection open). A full table, or a kernel without one, leaves sockets on their descriptors.
//   The kernel reads a slot when it takes the entry that names it, at the next submission, while the
//   table update is immediate: so a slot released in a turn (a close handed here) is not given to
//   another socket until the kernel has taken every entry prepared before the release
//   (`fixed_released_`, with the SQ position at release). Reused at once, an entry the released
//   socket had pending in the SQ (its multishot re-armed earlier in the turn) named the new socket's
//   file: it read a new connection's first bytes and dropped them as its own (a stress run,
//   CORIO_URING_MULTISHOT=all: the server never saw a client's first message).
// Invariants (owning thread only, like the rest of the reactor):
//  - a source is in `sources_` while its owner is this reactor; `armed` while the kernel holds its
//    multishot (`armed_` counts them); parked ops wait in arrival order (from `waiter`, linked
//    through io_op::next: one at most on a stream, whose reads are one at a time; any number of
//    accepts on a listener), each counted in `in_flight_`, and none waits while completions are
//    queued;
//  - an op whose request in the kernel uses the source's socket (a single-shot read, a send on its
//    registered file) holds it (io_op::held_on, counted in `held`) until that request's CQE;
//  - the reactor side of a released source (the socket let go) lets go of it (drop_reactor_side; the
//    socket's handle keeps its part until the socket object goes: io_source.hpp, "Lifetime") when
//    neither its multishot nor a held request is in the kernel: at once, at the CQE without
//    IORING_CQE_F_MORE after the ASYNC_CANCEL release sent, or at the last held request's CQE;
//    buffers named by later CQEs go back to the ring and descriptors are closed;
//  - `closing` is set (release) by release_io_source, on whichever thread closes the socket, before
//    it shuts a stream down; a held request that completes after that reports -ECANCELED whatever
//    the kernel said (the shutdown ends a recv at end of file and fails a send with EPIPE; a close
//    here cancels them), so a close reads as a cancellation on this backend as on epoll (the store
//    comes before the shutdown system call whose effect the CQE reports). The same holds for a
//    multishot CQE after it: nothing is queued, the parked ops end -ECANCELED, nothing re-arms, and
//    an op handed here from another worker finds the source closing and ends -ECANCELED too. (A
//    listener shut down, by another process that shares it, ends its multishot accept with -EINVAL,
//    which as a first CQE also reads as "no multishot in this kernel": a closing source's CQE never
//    turns multishot off for the reactor, which had left its other listeners' armed accepts unread.)
//  - a listener is never shut down here: other processes may share it (a pre-fork server's
//    children), and a shutdown would stop it listening in all of them. Its armed multishot holds it
//    open instead, so a release on the home thread submits the multishot's cancel and runs the
//    ring's deferred work at once, and the port can be bound again when the close returns.
//  - a parked op cancelled by its task is not in the kernel: it finishes with -ECANCELED through
//    `finished_here_` at the next reap, which then does not block. The op records its source
//    (`parked_on`), since its socket may have been moved or closed since it parked; a release (the
//    socket closed under it) finishes every op parked on the source the same way.
// Release from another thread: the releasing thread shuts a stream down (the peer gets its FIN at
//   once; a listener is left alone, see above). On another worker of the home's runtime it then
//   hands the source to the home slot, which releases it at its next turn (io_slot.hpp, "Release").
//   Anywhere else (a stream destroyed off its loop's thread, or while the loop is not running), or
//   once the home has shut down, it moves `state` live -> released (acq_rel CAS); the owner frees
//   the source at its next CQE (a stream's shutdown makes one arrive if a multishot is armed) or,
//   armed or not, when the close reaches it: adopt() notes the owner as a watcher of the number, so
//   the close that follows the release calls forget_elsewhere() and the owner's next reap finds the
//   source by number (`source_by_fd_`) and release()s it if it is still `released` (a newer socket
//   with that number would be live; one adopted here before that reap lets go of the old source
//   first, so the look-up never hides it). Without that, a source whose multishot had ended (end of
//   file, a dry ring) kept its registered file, and with it the socket, until teardown. A later request
//   on the number without a source (a write from another worker) makes that reactor a watcher too,
//   and the close reaches both. Teardown moves live -> orphaned with the same CAS: whichever CAS
//   loses, the other side frees it. Nothing else of the source is shared between threads but its
//   home (claim_home, io_source.hpp).
// Adoption: a source no reactor keeps (new from claim_home, or orphaned by a teardown) is adopted by
//   the first operation that reaches its home, with a CAS orphaned -> live. A socket closing on
//   another thread at that moment takes it with the same CAS, orphaned -> released, and frees it;
//   exactly one of the two has it. The loser touches nothing: a losing adoption ends its op
//   -ECANCELED (a later op finds the source closing, or homeless, and ends so too), a losing release
//   sees live and leaves the source to the reactor as above. When adoption was a plain store, a
//   close that read "orphaned" just before it let go of the reactor's share too, and the source was
//   freed while the reactor kept it linked (a TSan run of close_racing_a_read: the next adoption
//   wrote into the freed source through the list). The winning adoption registers the file and
//   notes itself as the number's watcher inside the number's call bracket (fd_records.hpp, "Calls"):
//   a close that began after the CAS makes enter_calls() refuse, and since that closing thread saw
//   the source live and left it here without being able to tell this reactor, the adoption lets go
//   of it itself and its op ends -ECANCELED; a close that begins later waits for the bracket, then
//   finds the note. Unbracketed, a close and a reuse of the number in between would have
//   registered the new socket's file for the old stream.
// Shutdown: cancel_all_and_reap completes parked ops, cancels the multishots and waits for their last
//   CQE; teardown_buffers() then orphans the sources the sockets still own (owner null: a later
//   operation on another reactor adopts it) and frees the ring. An orphaned listener's source keeps
//   the connections its multishot accepted and nobody took yet (plain descriptors, nothing of this
//   reactor): the adopting reactor's accepts take them first, and a release closes them. They were
//   closed here, resetting connections the kernel had accepted for a listener still open (a
//   review). A stream's queued bytes (CORIO_URING_MULTISHOT=all) are still dropped: they sit in
//   this ring's buffers, which go with it. It clears a source's home before its live -> orphaned
//   CAS, which is the last thing it does to the source: claim_home re-homes only an orphaned source
//   (io_source.hpp).
// Rejected: a queue without bound for accept (a listener nobody accepts on would hoard descriptors);
//   a fixed buffer per connection (memory grows with connections; the shared ring grows with traffic
//   in flight); copying buffered data into a per-stream heap queue (an allocation per read).
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <new>
#include <utility>

#include <corio/detail/io_slot.hpp>

#include "core/env_setting.hpp"
#include "io/fd_records.hpp"
#include "io/io_source_state.hpp"
#include "io/uring_reactor.hpp"

namespace corio::detail {

namespace {

constexpr unsigned buffer_size = 4096;
constexpr unsigned default_buffer_count = 1024;
constexpr unsigned most_buffers = 32768;  // the kernel's limit on a buffer ring's entries
constexpr std::uint16_t buffer_group = 0;
constexpr std::size_t accept_queue_bound = 64;
constexpr unsigned fixed_table_size = 8192;

// The soft RLIMIT_NOFILE now: what an accept the kernel prepares now allocates descriptors under.
std::uint64_t descriptor_limit() noexcept {
  rlimit limit{};
  return ::getrlimit(RLIMIT_NOFILE, &limit) == 0 ? limit.rlim_cur : 0;
}

// An accept multishot's result that only a limit raised since it was armed makes an error ("Accept").
bool stale_descriptor_limit(const io_source& source, std::int32_t result) noexcept {
  return result == -EMFILE && !source.armed && descriptor_limit() > source.armed_under_limit;
}

enum class multishot_use : std::uint8_t { none, accept, all };

// CORIO_URING_MULTISHOT: 0 (none), accept (the default) or all (reads from a multishot recv too).
multishot_use configured_multishot() noexcept {
  static env_knob knob{"CORIO_URING_MULTISHOT"};
  return static_cast<multishot_use>(env_choice(knob,
                                               {{"0", static_cast<int>(multishot_use::none)},
                                                {"accept", static_cast<int>(multishot_use::accept)},
                                                {"all", static_cast<int>(multishot_use::all)}},
                                               static_cast<int>(multishot_use::accept), "accept"));
}

// CORIO_URING_BUFFERS: the buffer ring's entries, rounded up to a power of two (the kernel's rule).
unsigned configured_buffer_count() noexcept {
  static env_knob knob{"CORIO_URING_BUFFERS"};
  const auto count = static_cast<unsigned>(env_count(knob, default_buffer_count, most_buffers));
  unsigned power = 1;
  while (power < count) {
    power *= 2;
  }
  return power;
}

std::uint64_t tag_of(io_source& source) noexcept { return reinterpret_cast<std::uintptr_t>(&source) | uring_source_tag; }

}  // namespace

void uring_reactor::setup_multishot() noexcept {
  multishot_use use = configured_multishot();
  if (use == multishot_use::none || (use == multishot_use::all && !setup_buffers())) {
    return;  // every accept and read single-shot, on its descriptor
  }
  multishot_ = true;
  multishot_reads_ = use == multishot_use::all;
  setup_fixed_files();
}

bool uring_reactor::setup_buffers() noexcept {
  unsigned count = configured_buffer_count();
  std::size_t ring_bytes = count * sizeof(io_uring_buf);
  std::size_t data_bytes = std::size_t{count} * buffer_size;
  void* ring = ::mmap(nullptr, ring_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  void* data = ::mmap(nullptr, data_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  io_uring_buf_reg registration{};
  registration.ring_addr = reinterpret_cast<std::uintptr_t>(ring);
  registration.ring_entries = count;
  registration.bgid = buffer_group;
  if (ring == MAP_FAILED || data == MAP_FAILED || io_uring_register_buf_ring(&ring_, &registration, 0) != 0) {
    if (ring != MAP_FAILED) {
      ::munmap(ring, ring_bytes);
    }
    if (data != MAP_FAILED) {
      ::munmap(data, data_bytes);
    }
    return false;  // no provided buffers here (kernel < 5.19)
  }
  buffer_ring_ = static_cast<io_uring_buf_ring*>(ring);
  buffers_ = static_cast<std::byte*>(data);
  buffer_count_ = count;
  io_uring_buf_ring_init(buffer_ring_);
  for (unsigned id = 0; id < count; ++id) {
    io_uring_buf_ring_add(buffer_ring_, buffers_ + std::size_t{id} * buffer_size, buffer_size,
                          static_cast<std::uint16_t>(id), io_uring_buf_ring_mask(count), static_cast<int>(id));
  }
  io_uring_buf_ring_advance(buffer_ring_, static_cast<int>(count));
  buffers_free_ = count;
  return true;
}

void uring_reactor::setup_fixed_files() noexcept {
  rlimit limit{};
  unsigned size = fixed_table_size;
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < size) {
    size = static_cast<unsigned>(limit.rlim_cur);  // the kernel refuses a table larger than this limit
  }
  if (io_uring_register_files_sparse(&ring_, size) == 0) {
    fixed_capacity_ = size;
  }
}

void uring_reactor::teardown_buffers() noexcept {
  while (sources_ != nullptr) {
    io_source& source = *sources_;
    unlink(source);
    if (source.kind != io_kind::accept) {
      drop_queued(source);  // in this ring's buffers: a read elsewhere starts afresh
    }
    source.waiter = nullptr;
    source.last_waiter = nullptr;
    source.armed = false;
    source.cancelling = false;
    source.owner = nullptr;
    source.fixed = -1;  // the table goes with the ring, right after this
    source.slot.store(nullptr, std::memory_order_relaxed);  // published by the CAS below
    auto live = io_source::life::live;
    if (source.released ||
        !source.state.compare_exchange_strong(live, io_source::life::orphaned, std::memory_order_acq_rel)) {
      drop_queued(source);  // accepted connections nobody can take any more
      drop_reactor_side(source);  // let go already (here, or by another thread)
    }
  }
  if (buffer_ring_ != nullptr) {
    io_uring_unregister_buf_ring(&ring_, buffer_group);
    ::munmap(buffer_ring_, buffer_count_ * sizeof(io_uring_buf));
    ::munmap(buffers_, std::size_t{buffer_count_} * buffer_size);
    buffer_ring_ = nullptr;
    buffers_ = nullptr;
  }
  multishot_ = false;
  multishot_reads_ = false;
}

bool uring_reactor::ring_has_room() const noexcept { return buffers_free_ >= std::max(1u, buffer_count_ / 8); }

bool uring_reactor::submit_with_source(io_op& op) noexcept {
  // claim_home homed it here. Handed here from another worker, the socket may have been closed on the
  // way (the socket's part keeps the source allocated: io_source.hpp, "Lifetime").
  io_source* homed = op.source->load(std::memory_order_acquire);
  if (homed == nullptr || homed->closing.load(std::memory_order_acquire)) {
    op.result = -ECANCELED;
    return true;
  }
  io_source& source = *homed;
  if (source.owner == nullptr && !adopt(source)) {  // new, or its reactor is gone: it lives here from now on
    op.result = -ECANCELED;  // unless its socket, closing on another thread, let go of it first
    return true;
  }
  if (!source.queue.empty()) {
    op.result = take(source, op);
    return true;
  }
  if (source.kind == io_kind::recv && !source.armed && (!multishot_reads_ || source.ended || !ring_has_room())) {
    prep_single(op);
  } else {
    if (!source.armed) {
      arm(source);
    }
    park(source, op);
  }
  ++in_flight_;
  return false;
}

bool uring_reactor::adopt(io_source& source) noexcept {
  auto orphaned = io_source::life::orphaned;
  if (!source.state.compare_exchange_strong(orphaned, io_source::life::live, std::memory_order_acq_rel)) {
    return false;  // released by its closing socket, which frees it
  }
  source.owner = this;
  source.next = sources_;
  if (sources_ != nullptr) {
    sources_->prev = &source;
  }
  sources_ = &source;
  // The file's registration names the number: bracketed like every call on one (fd_records.hpp,
  // "Calls"), so a close cannot slip in between and leave the slot holding the file of the socket that
  // reuses the number. The watcher note inside the bracket makes a later close tell this reactor.
  fd_record* record = record_of(source.fd, true);
  if (!enter_calls(record, source.generation)) {
    // Closed since the CAS above: the closing thread found it live and left it to this reactor, but
    // will not tell it (no note yet). Its CAS to released came before the close, so let go of it now.
    let_go_if_released_elsewhere(source);  // frees it: nothing holds it yet
    return false;
  }
  if (source.kind == io_kind::recv) {
    source.fixed = register_fixed(source.fd);
  }
  note_watcher(record, id_);
  leave_calls(record);
  auto index = static_cast<std::size_t>(source.fd);
  try {
    if (index >= source_by_fd_.size()) {
      source_by_fd_.resize(std::max(index + 1, source_by_fd_.size() * 2));
    }
    if (io_source* previous = source_by_fd_[index]; previous != nullptr && previous != &source) {
      // The number's previous socket, closed on another thread whose word has not reached this reactor
      // yet (its next reap looks the number up, and would find this source instead): let go of it now,
      // or its registered file would keep that socket open until teardown.
      let_go_if_released_elsewhere(*previous);
    }
    source_by_fd_[index] = &source;
  } catch (const std::bad_alloc&) {
    // Out of memory: a close on another thread reaches it at a multishot CQE or at teardown, as below.
  }
  return true;
}

void uring_reactor::release_closed_elsewhere(int fd) noexcept {
  auto index = static_cast<std::size_t>(fd);
  if (index >= source_by_fd_.size() || source_by_fd_[index] == nullptr) {
    return;
  }
  let_go_if_released_elsewhere(*source_by_fd_[index]);  // a newer socket with this number is live: kept
}

bool uring_reactor::let_go_if_released_elsewhere(io_source& source) noexcept {
  if (!source.released && source.state.load(std::memory_order_acquire) == io_source::life::released) {
    release(source);
    return true;
  }
  return false;
}

void uring_reactor::arm(io_source& source) noexcept {
  io_uring_sqe* sqe = next_sqe();
  if (source.kind == io_kind::recv) {
    io_uring_prep_recv_multishot(sqe, source.fd, nullptr, 0, 0);
    use_fixed_file(sqe, &source);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = buffer_group;
  } else {
    io_uring_prep_multishot_accept(sqe, source.fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    source.armed_under_limit = descriptor_limit();
  }
  if ((sqe->flags & IOSQE_FIXED_FILE) == 0) {
    list_by_number(sqe, {source.fd, source.generation});
  }
  io_uring_sqe_set_data64(sqe, tag_of(source));
  source.armed = true;
  ++armed_;
}

void uring_reactor::cancel_multishot(io_source& source) noexcept {
  if (!source.armed || source.cancelling) {
    return;
  }
  io_uring_sqe* sqe = next_sqe();
  io_uring_prep_cancel64(sqe, tag_of(source), 0);
  io_uring_sqe_set_data64(sqe, 0);
  source.cancelling = true;
}

std::int32_t uring_reactor::take(io_source& source, io_op& op) noexcept {
  io_source::entry& front = source.queue.front();
  if (source.kind == io_kind::accept || front.result <= 0) {
    std::int32_t result = front.result;
    source.queue.pop_front();
    return result;
  }
  auto* out = static_cast<std::byte*>(op.buffer);
  std::uint32_t copied = 0;
  while (!source.queue.empty() && copied < op.length && source.queue.front().result > 0) {
    io_source::entry& chunk = source.queue.front();
    std::uint32_t step = std::min(op.length - copied, static_cast<std::uint32_t>(chunk.result) - chunk.offset);
    std::memcpy(out + copied, buffers_ + std::size_t{chunk.buffer} * buffer_size + chunk.offset, step);
    copied += step;
    chunk.offset += step;
    if (chunk.offset == static_cast<std::uint32_t>(chunk.result)) {
      recycle(chunk.buffer);
      source.queue.pop_front();
    }
  }
  return static_cast<std::int32_t>(copied);
}

void uring_reactor::recycle(std::uint16_t buffer_id) noexcept {
  io_uring_buf_ring_add(buffer_ring_, buffers_ + std::size_t{buffer_id} * buffer_size, buffer_size, buffer_id,
                        io_uring_buf_ring_mask(buffer_count_), 0);
  io_uring_buf_ring_advance(buffer_ring_, 1);
  ++buffers_free_;
}

void uring_reactor::on_source_completion(io_source& source, std::int32_t result, std::uint32_t flags,
                                         completion_sink sink) noexcept {
  ++multishot_completions_;
  let_go_if_released_elsewhere(source);  // armed until this CQE is handled: freed below, not here
  bool first = !std::exchange(source.completed_once, true);
  if ((flags & IORING_CQE_F_MORE) == 0) {
    source.armed = false;
    source.cancelling = false;
    --armed_;
  }
  // Closed on another thread, whose shutdown may be what ended the multishot (a recv at end of
  // file): nothing it reports is for a reader any more.
  bool gone = source.released || source.closing.load(std::memory_order_acquire);
  // Never queued, whoever cancelled it (design note, "Cancelled multishots").
  bool quiet_cancel = result == -ECANCELED;
  if (first && result == -EINVAL && !source.armed && !gone) {
    multishot_ = false;  // the kernel has the buffer ring but not this multishot op (< 6.0)
  } else if (source.kind == io_kind::recv) {
    if ((flags & IORING_CQE_F_BUFFER) != 0) {
      auto id = static_cast<std::uint16_t>(flags >> IORING_CQE_BUFFER_SHIFT);
      --buffers_free_;
      if (result > 0 && !gone) {
        source.queue.push_back({result, id, 0});
      } else {
        recycle(id);
      }
    } else if (result != -ENOBUFS && !quiet_cancel && !gone) {
      source.queue.push_back({result, 0, 0});  // EOF or an error: delivered after the data, once
      source.ended = true;
    }
  } else if (result >= 0 && gone) {
    ::close(result);
  } else if (!quiet_cancel && !gone && !stale_descriptor_limit(source, result)) {
    source.queue.push_back({result, 0, 0});
  }

  if (source.released) {
    free_if_unheld(source);
    return;
  }
  if (gone) {
    finish_parked(source);  // cancelled, at the next reap; the release on its way here finds none
    return;
  }
  while (source.waiter != nullptr && !source.queue.empty()) {
    io_op& op = unpark_oldest(source);
    op.result = take(source, op);
    --in_flight_;
    sink(op);
  }
  if (source.waiter != nullptr && !source.armed && !draining_) {  // ended with nothing for them
    bool plain_recv = source.kind == io_kind::recv && (source.ended || !ring_has_room());
    if (multishot_ && !plain_recv) {
      arm(source);
    } else {
      while (source.waiter != nullptr) {
        prep_single(unpark_oldest(source));  // stays counted in in_flight_; its own CQE finishes it
      }
    }
  }
  if (source.kind == io_kind::accept && source.queue.size() >= accept_queue_bound) {
    cancel_multishot(source);
  }
}

void uring_reactor::park(io_source& source, io_op& op) noexcept {
  op.next = nullptr;
  op.parked_on = &source;
  if (source.last_waiter != nullptr) {
    source.last_waiter->next = &op;
  } else {
    source.waiter = &op;
  }
  source.last_waiter = &op;
}

io_op& uring_reactor::unpark_oldest(io_source& source) noexcept {
  io_op& op = *source.waiter;
  source.waiter = op.next;
  if (source.waiter == nullptr) {
    source.last_waiter = nullptr;
  }
  op.next = nullptr;
  op.parked_on = nullptr;
  return op;
}

// Found through the op, not its socket: the socket may have been moved or closed meanwhile.
bool uring_reactor::cancel_parked(io_op& op) noexcept {
  if (op.parked_on == nullptr) {
    return false;
  }
  io_source& source = *op.parked_on;
  io_op* before = nullptr;
  io_op* each = source.waiter;
  while (each != &op) {
    before = std::exchange(each, each->next);
  }
  (before != nullptr ? before->next : source.waiter) = op.next;
  if (source.last_waiter == &op) {
    source.last_waiter = before;
  }
  op.parked_on = nullptr;
  finish_here(op);
  return true;
}

void uring_reactor::finish_parked(io_source& source) noexcept {
  while (source.waiter != nullptr) {
    finish_here(unpark_oldest(source));
  }
}

void uring_reactor::finish_here(io_op& op) noexcept {
  op.result = -ECANCELED;
  op.next = finished_here_;
  finished_here_ = &op;
}

void uring_reactor::detach_all_parked() noexcept {
  for (io_source* source = sources_; source != nullptr; source = source->next) {
    finish_parked(*source);
  }
}

void uring_reactor::drop_queued(io_source& source) noexcept {
  source.queue.for_each([&](const io_source::entry& each) {
    if (source.kind == io_kind::recv && each.result > 0) {
      recycle(each.buffer);
    } else if (source.kind == io_kind::accept && each.result >= 0) {
      ::close(each.result);
    }
  });
  source.queue.clear();
}

void uring_reactor::unlink(io_source& source) noexcept {
  auto index = static_cast<std::size_t>(source.fd);
  if (index < source_by_fd_.size() && source_by_fd_[index] == &source) {
    source_by_fd_[index] = nullptr;
  }
  (source.prev != nullptr ? source.prev->next : sources_) = source.next;
  if (source.next != nullptr) {
    source.next->prev = source.prev;
  }
  source.prev = nullptr;
  source.next = nullptr;
}

int uring_reactor::register_fixed(int fd) noexcept {
  if (!fixed_released_.empty()) {
    const unsigned taken = io_uring_smp_load_acquire(ring_.sq.khead);
    std::erase_if(fixed_released_, [&](const released_slot& each) {
      if (!taken_by_kernel(each.position, taken)) {
        return false;  // an entry prepared before its release may still name it: not yet
      }
      fixed_free_.push_back(each.index);
      return true;
    });
  }
  if (fixed_free_.empty() && fixed_next_ == fixed_capacity_) {
    return -1;  // the table is full (or the kernel has none): this socket goes by its descriptor
  }
  unsigned index = 0;
  if (!fixed_free_.empty()) {
    index = fixed_free_.back();
    fixed_free_.pop_back();
  } else {
    index = fixed_next_++;
  }
  if (io_uring_register_files_update(&ring_, index, &fd, 1) != 1) {
    fixed_free_.push_back(index);
    return -1;
  }
  return static_cast<int>(index);
}

void uring_reactor::unregister_fixed(io_source& source) noexcept {
  if (source.fixed < 0) {
    return;
  }
  int none = -1;
  io_uring_register_files_update(&ring_, static_cast<unsigned>(source.fixed), &none, 1);
  try {
    fixed_released_.push_back({static_cast<unsigned>(source.fixed), ring_.sq.sqe_tail - 1});
  } catch (const std::bad_alloc&) {
    // Out of memory: the slot is not reused (the table has one fewer).
  }
  source.fixed = -1;
}

void uring_reactor::use_fixed_file(io_uring_sqe* sqe, const io_source* source) const noexcept {
  if (source != nullptr && source->owner == this && source->fixed >= 0) {
    sqe->fd = source->fixed;
    sqe->flags |= IOSQE_FIXED_FILE;
  }
}

void uring_reactor::release(io_source& source) noexcept {
  source.released = true;
  finish_parked(source);  // the socket was closed under them: they end cancelled, like asio's operation_aborted
  drop_queued(source);
  unregister_fixed(source);  // before the socket's close(), which would not end a file the table holds
  if (source.armed) {
    cancel_multishot(source);  // freed at its last CQE
    if (source.kind == io_kind::accept) {
      // The armed multishot holds the listener open: the cancel goes in now, and its work runs now,
      // so the port can be bound again at once (SO_REUSEADDR), as on epoll.
      submit_guarded([this] { io_uring_submit_and_get_events(&ring_); });
    }
  }
  free_if_unheld(source);
}

void uring_reactor::free_if_unheld(io_source& source) noexcept {
  if (!source.armed && source.held == 0) {
    unlink(source);
    drop_reactor_side(source);
  }
}

void uring_reactor::hold(io_op& op, io_source* source) noexcept {
  if (source != nullptr && source->owner == this) {
    op.held_on = source;
    ++source->held;
  }
}

std::int32_t uring_reactor::end_held(io_op& op, std::int32_t result) noexcept {
  io_source& source = *std::exchange(op.held_on, nullptr);
  --source.held;
  // Ended by the close (a shutdown fails a send with EPIPE, ends a recv at EOF): -ECANCELED. A socket
  // closing on another thread sets `closing` before its CAS to released, so a request that finds it
  // released reports the close too, whatever `closing` read before. Decided from the same read that
  // lets go of the source: deciding from an earlier one let a close fall between the two, and the
  // request came back with its own result after its source was let go, so finish() issued the rest
  // of a short send on it and held it again, and the next CQE let go of it a second time.
  if (source.released) {
    free_if_unheld(source);
    return -ECANCELED;
  }
  const bool closing = source.closing.load(std::memory_order_acquire);
  if (let_go_if_released_elsewhere(source) || closing) {  // may free the source: nothing of it is read after
    result = -ECANCELED;
  }
  return result;
}

io_slot* claim_home(std::atomic<io_source*>& pointer, io_kind kind, socket_id socket, io_slot& here) {
  io_source* source = pointer.load(std::memory_order_acquire);
  if (source == nullptr) {
    auto* created = new io_source;
    created->kind = kind;
    created->fd = socket.fd;
    created->generation = socket.generation;
    created->slot.store(&here, std::memory_order_relaxed);
    created->state.store(io_source::life::orphaned, std::memory_order_relaxed);  // no reactor keeps it yet
    if (pointer.compare_exchange_strong(source, created, std::memory_order_acq_rel, std::memory_order_acquire)) {
      return &here;
    }
    delete created;  // another worker's operation created one first: use that
  }
  io_slot* home = home_of(*source);
  if (home != nullptr) {
    return home;
  }
  if (source->state.load(std::memory_order_acquire) != io_source::life::orphaned) {
    return nullptr;  // its reactor is being torn down and has not let go of it yet
  }
  if (source->slot.compare_exchange_strong(home, &here, std::memory_order_acq_rel, std::memory_order_acquire)) {
    return &here;
  }
  return home;  // another worker re-homed it first
}

io_source* closed_io_source() noexcept {
  // Live with no home: claim_home() answers "being torn down". Never destroyed: a socket may close
  // during static destruction.
  static io_source* const closed = [] {
    auto* source = new io_source;
    source->closing.store(true, std::memory_order_relaxed);
    return source;
  }();
  return closed;
}

void release_io_source(io_source* source) noexcept {
  if (source->closing.exchange(true, std::memory_order_acq_rel)) {  // before the shutdown below ends its requests
    return;  // released already (a close, then the socket object's destruction)
  }
  io_slot* here = current_io_slot;
  io_slot* home = home_of(*source);
  // Live: a reactor keeps it (set on adoption); otherwise no reactor ever took it (its first operation
  // never reached one) or its reactor is gone, and it is ours to free below.
  bool kept = source->state.load(std::memory_order_acquire) == io_source::life::live;
  if (kept && here != nullptr && here == home) {
    source->owner->release(*source);  // on the owning thread, inside its loop
    return;
  }
  // Elsewhere: touch nothing of the reactor. A stream's shutdown sends the peer its FIN now (the
  // registered file table may hold the socket open until the home releases it) and ends an armed
  // multishot. Not a listener's: other processes may share it (a pre-fork server's children), and a
  // shutdown would stop it listening for all of them; its home cancels its multishot at its next turn.
  if (source->kind != io_kind::accept) {
    ::shutdown(source->fd, SHUT_RDWR);
  }
  if (kept && here != nullptr && home != nullptr && here->shares_executor_with(*home) &&
      home->hand_off_release(*source)) {
    return;  // another worker of the home's runtime: the home releases it at its next turn
  }
  // Any other thread (or the home has shut down): an armed multishot's last CQE lets the reactor free
  // the source; otherwise the reactor frees it when it is torn down. If no reactor keeps it (orphaned),
  // it is ours to free. One CAS from whichever state it is in decides, against a reactor adopting it
  // this moment (see "Adoption").
  auto was = source->state.load(std::memory_order_acquire);
  while (!source->state.compare_exchange_weak(was, io_source::life::released, std::memory_order_acq_rel,
                                              std::memory_order_acquire)) {
  }
  if (was == io_source::life::live) {
    return;
  }
  source->queue.for_each([&](const io_source::entry& each) {
    if (source->kind == io_kind::accept && each.result >= 0) {
      ::close(each.result);
    }
  });
  drop_reactor_side(*source);
}

void drop_socket_side(io_source* source) noexcept { drop_owner(*source); }

void drop_reactor_side(io_source& source) noexcept {
  source.slot.store(nullptr, std::memory_order_release);  // an op routed after this ends -ECANCELED
  drop_owner(source);
}

void drop_owner(io_source& source) noexcept {
  if (source.owners.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    delete &source;
  }
}

}  // namespace corio::detail
