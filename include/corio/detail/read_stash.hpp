#pragma once
// Bytes a stream's reads took from the kernel for a task that was being cancelled: the stream keeps
// them, and its next read returns them first. That makes a stream's reads cancel-safe: a read that
// ends cancelled or timed out consumed nothing.
//
// Design note.
// Why: with completion-based I/O (io_uring) a read cancelled from another thread can still complete
//   with data (the kernel finished it before the cancel reached it), and a read racing another branch
//   of when_any can complete in the same reap as the winner. Either way the bytes are in user memory
//   already and cannot go back into the socket; handed to a task that is being cancelled (or to a
//   when_any branch that lost), they were lost to the stream's next reader. tokio's readiness-based
//   reads never consume anything when cancelled; this gives corio's the same guarantee.
// Who: io_awaiter::check() keeps the bytes of a read that completed with data while a stop was
//   requested (its task, or a when_any branch, being cancelled; a deadline's stop of a task under
//   with_timeout too), and reports the cancellation (or timeout) instead; a read past its own
//   deadline that got data returns it. read_exact keeps what it had read before it was cancelled,
//   ahead of anything kept after it. The next read_some (or read_exact) takes from here without a
//   system call.
//   A stream destroyed under such a read (a misuse) took its stash along: the bytes are written only
//   while the socket is open, inside the bracket a close waits for (keep_while_open, io_op.hpp), and
//   are dropped once it is closed. The stream declares the allocation that holds its stash before
//   its socket, so the stash outlives that close. That allocation, not the stream object, is what a
//   read points at: a stream moved under a read takes it along, and the bytes reach it in its new place.
// Threads: the stream's reader only (one reader at a time, as for every stream operation).
// Memory: empty costs nothing; kept bytes are in one vector, freed once they are all taken.
#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

namespace corio::detail {

class read_stash {
 public:
  /// Not movable: reads in flight point at it (tcp_stream keeps it in an allocation of its own).
  read_stash() noexcept = default;
  read_stash(const read_stash&) = delete;
  read_stash& operator=(const read_stash&) = delete;
  ~read_stash() = default;

  bool empty() const noexcept { return taken_ == bytes_.size(); }

  /// Copies kept bytes into `out`, oldest first; returns how many.
  std::size_t take(std::span<std::byte> out) noexcept {
    std::size_t count = std::min(out.size(), bytes_.size() - taken_);
    std::copy_n(bytes_.begin() + static_cast<std::ptrdiff_t>(taken_), count, out.begin());
    taken_ += count;
    if (empty()) {
      bytes_.clear();
      bytes_.shrink_to_fit();
      taken_ = 0;
    }
    return count;
  }

  /// Keeps `data` ahead of whatever is kept already (it was read from the socket before that).
  /// Throws std::bad_alloc.
  void keep_front(std::span<const std::byte> data) {
    bytes_.erase(bytes_.begin(), bytes_.begin() + static_cast<std::ptrdiff_t>(taken_));
    taken_ = 0;
    bytes_.insert(bytes_.begin(), data.begin(), data.end());
  }

 private:
  std::vector<std::byte> bytes_;
  std::size_t taken_ = 0;  // bytes_[0, taken_) were handed out already
};

}  // namespace corio::detail
