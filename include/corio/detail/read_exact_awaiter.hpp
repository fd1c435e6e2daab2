#pragma once
// What tcp_stream::read_exact returns: the task that reads (a loop of read_some steps), awaited
// through an awaiter that takes the verdict on the bytes when the task has finished, not inside it.
//
// Design note.
// Purpose: read_exact is cancel-safe like read_some (a read that ends cancelled consumed nothing),
//   also as a when_any operand on a runtime of several workers. when_any decides its winner when an
//   operand's awaiter resumes, before that awaiter's await_resume runs (join_child.hpp, claiming_awaiter):
//   a loser sees its own stop requested there. A read_some operand takes its bytes in its
//   await_resume, so it always sees that verdict. A task operand does not: its last read takes its
//   bytes inside the task, then the task finishes, and only then is the winner decided; when the
//   other operand (a sleep on another worker) won in between, when_any dropped the task's result and
//   with it the bytes (a randomized stress run: a whole read's worth missing from a stream, in most
//   runs of a two-worker runtime; never on one thread, where nothing runs in between).
// So: the task runs as before (its steps keep their bytes for a stop that reaches them), and this
//   awaiter's await_resume asks once more: a stop requested on the awaiting chain by then (a lost
//   when_any, a cancellation, a deadline) puts the bytes the task read back at the front of the
//   stream's stash, and the read ends cancelled (timed out, if a deadline made the request), as a
//   read_some that completed with data under a stop does (io_awaiter::settle). Nothing is dropped:
//   either the caller gets the bytes, or the stream's next read does.
// Who calls what: the awaiting coroutine's thread only; the stop state is the one in force when the
//   task was started (with_timeout swaps in its own for the await, and swaps it back before this
//   awaiter's await_resume, so it is taken in await_suspend). The stash is written while the socket
//   is open only (keep_while_open), as the task's own steps write it.
// Memory order: stop_requested() is an acquire load; what the task wrote reaches await_resume through
//   the task's completion (it resumes this coroutine).
#include <coroutine>
#include <cstddef>
#include <span>
#include <system_error>
#include <utility>

#include <corio/detail/io_op.hpp>
#include <corio/detail/read_stash.hpp>
#include <corio/detail/stop_state.hpp>
#include <corio/errors.hpp>
#include <corio/net/error.hpp>
#include <corio/task.hpp>

namespace corio::detail {

class read_exact_awaiter {
 public:
  read_exact_awaiter(task<std::size_t> reading, socket_id socket, read_stash* stash, std::span<std::byte> buffer,
                     std::error_code* error) noexcept
      : reading_(std::move(reading)), socket_(socket), stash_(stash), buffer_(buffer), error_(error) {}

  bool await_ready() const { return reading_.operator co_await().await_ready(); }
  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> self) {
    stop_ = stop_token_of(self);
    return reading_.operator co_await().await_suspend(self);
  }
  /// The bytes read, as the task yields them, unless a stop was requested meanwhile: see above.
  std::size_t await_resume() {
    std::size_t read = reading_.operator co_await().await_resume();
    bool kept_error = error_ != nullptr && *error_ && *error_ != net::errc::end_of_stream;
    if (read == 0 || kept_error || stop_ == nullptr || !stop_->stop_requested()) {
      return read;
    }
    give_back_read(socket_, stash_, buffer_.first(read));
    if (error_ != nullptr) {
      *error_ = std::make_error_code(stop_->stopped_by_deadline() ? std::errc::timed_out : std::errc::operation_canceled);
      return 0;
    }
    throw cancelled();
  }

 private:
  task<std::size_t> reading_;
  socket_id socket_;
  read_stash* stash_;
  std::span<std::byte> buffer_;
  std::error_code* error_;
  stop_state* stop_ = nullptr;
};

}  // namespace corio::detail
