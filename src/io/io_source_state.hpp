#pragma once
// A socket's multishot state in an io_uring reactor (include/corio/detail/io_source.hpp is the socket's
// side; the protocol is in uring_source.cpp's design note). Here so that a slot can check a source's
// home without a call: the one field other threads read.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <iterator>

#include <corio/detail/io_op.hpp>
#include <corio/detail/ring.hpp>

namespace corio::detail {

class uring_reactor;

struct alignas(64) io_source {
  struct entry {
    std::int32_t result;  // recv: bytes in the buffer, 0 (EOF) or -errno; accept: descriptor or -errno
    std::uint16_t buffer;
    std::uint32_t offset;  // recv: bytes already copied out
  };
  /// Who lets go of it when the owning thread is not the one releasing (see release_io_source).
  enum class life : std::uint8_t { live, released, orphaned };

  io_source() noexcept = default;
  io_source(const io_source&) = delete;
  io_source& operator=(const io_source&) = delete;
  /// Empties the queue while its slots, declared after it, still live.
  ~io_source() { queue.clear(); }

  // Hot: what a single-shot read or write on the socket's registered file touches at submission and
  // completion (route, submit_with_source, hold, end_held), packed into the first cache line (the
  // struct is aligned to one): at 500 busy connections every line per socket is a miss per request.
  io_kind kind = io_kind::recv;
  std::atomic<life> state{life::live};
  bool armed = false;
  bool released = false;    // the socket let go
  bool ended = false;       // recv: EOF or an error arrived; reads are plain from then on
  std::atomic<bool> closing{false};  // the socket is being closed: an op it ends reports -ECANCELED
  bool cancelling = false;  // ASYNC_CANCEL sent for the armed multishot
  bool completed_once = false;
  int fixed = -1;           // recv: the socket's slot in the owner's registered file table, or -1
  std::uint32_t held = 0;   // ops' requests in the kernel on this socket (io_op::held_on): freed after the last
  uring_reactor* owner = nullptr;
  std::atomic<io_slot*> slot{nullptr};  // the home: the slot the owner serves (claim_home; io_source.hpp)
  // Completions not yet taken: a request/response socket holds one at a time, so a few slots inside
  // the source serve it without another allocation (a std::deque is two more). Its size is in the hot line.
  ring<entry> queue{queue_slots, std::size(queue_slots)};
  // The rest: multishot, adoption, release and lifetime.
  int fd = -1;
  std::uint32_t generation = 0;  // the socket's (socket_id): a multishot prepared on its number names it
  io_source* prev = nullptr;
  io_source* next = nullptr;
  io_op* waiter = nullptr;       // the oldest parked op; the rest follow through io_op::next
  io_op* last_waiter = nullptr;
  entry queue_slots[4];
  // The socket's handle, the reactor side, and each op pinning it on its way to its home (io_source.hpp,
  // "Lifetime"): a listener's accepts may be handed off from many tasks at once.
  std::atomic<std::uint32_t> owners{2};
  io_source* next_released = nullptr;  // in its home slot's queue of sources let go on other workers
  std::uint64_t armed_under_limit = 0;  // accept: the soft RLIMIT_NOFILE its multishot was armed under
};
// The ring's pointer, capacity, head and size (what empty() reads) end the hot line.
static_assert(offsetof(io_source, queue) + 4 * sizeof(std::size_t) <= 64);

/// The reactor side lets go of `source` (io_source.hpp, "Lifetime"): clears its home, so operations
/// routed later end -ECANCELED, and frees it if the socket's handle let go already.
void drop_reactor_side(io_source& source) noexcept;
/// Either owner's last step: frees `source` if the other one let go already.
void drop_owner(io_source& source) noexcept;

/// Any thread: the slot that keeps `source`, or null while no reactor does (claim_home re-homes it).
inline io_slot* home_of(const io_source& source) noexcept { return source.slot.load(std::memory_order_acquire); }

}  // namespace corio::detail
