#pragma once
// The handle a socket keeps to its multishot state in a reactor (an io_source, src/io/uring_source.cpp).
//
// Design note.
// Purpose: on io_uring, a tcp_stream's reads and a tcp_listener's accepts are served by one multishot
//   operation per socket (recv from the reactor's provided-buffer ring, or accept) whose completions
//   may arrive while nobody awaits; the io_source keeps them (buffer ids, descriptors, EOF or an error,
//   in order) until the next operation takes them. The socket owns the handle; the reactor owns the
//   memory while the kernel still holds the multishot, and frees it after the last completion.
// Threads: an io_source belongs to the reactor that created it (its home); it is used only on that
//   reactor's thread. Another worker of the same runtime reads only its home slot (home_of: written
//   when the source is created or adopted, before any other thread can see the socket's next
//   operation) and hands the operation to that slot (io_slot.hpp, "Multishot").
//   release_io_source() from any thread: off the owning thread it only shuts the socket down and
//   marks the source released (an atomic the reactor reads; uring_source.cpp has the protocol).
// Rejected: a socket-owned state the reactor points into (closing the socket while the kernel holds
//   the multishot would leave the reactor a dangling pointer); a map from descriptors to states in the
//   reactor (a look-up per completion).
#include <utility>

namespace corio::detail {

struct io_source;

/// Lets go of a socket's io_source: cancels its multishot in the kernel (the reactor frees the state
/// after the last completion), gives queued buffers back, closes queued accepted descriptors.
void release_io_source(io_source* source) noexcept;

class io_slot;

/// The slot whose reactor keeps `source`, or null once that reactor is gone (a later operation on
/// another reactor adopts it).
io_slot* home_of(const io_source& source) noexcept;

/// Owns the io_source pointer of one socket (null until an io_uring reactor creates it). Move-only.
class io_source_ref {
 public:
  io_source_ref() noexcept = default;
  io_source_ref(io_source_ref&& other) noexcept : source_(std::exchange(other.source_, nullptr)) {}
  io_source_ref& operator=(io_source_ref&& other) noexcept {
    if (this != &other) {
      reset();
      source_ = std::exchange(other.source_, nullptr);
    }
    return *this;
  }
  ~io_source_ref() { reset(); }

  void reset() noexcept {
    if (source_ != nullptr) {
      release_io_source(std::exchange(source_, nullptr));
    }
  }
  /// Where an operation's io_request::source points.
  io_source** slot() noexcept { return &source_; }

 private:
  io_source* source_ = nullptr;
};

}  // namespace corio::detail
