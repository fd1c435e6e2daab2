#pragma once
// One wait at a time on a receiver that keeps a position (broadcast_receiver's next message,
// watch_receiver's last seen version).
//
// Design note.
// Purpose: such a receiver's wait consumes nothing when it is granted; it reads the receiver's
//   position when it resumes and moves it on. Two waits in flight on one receiver object
//   (`when_all(rx.recv(), rx.recv())`) are both woken by one message, and the second finds its
//   message already taken: a broadcast would read a slot it has no message for, a watch would report
//   its sender gone. So the second wait to start is misuse, reported with std::logic_error when it
//   starts, as a stream reports two readers.
// State: a `lone_wait` flag in the receiver, claimed at the start of a wait (await_suspend) and
//   released at its very end: when await_resume has read and moved the position (or thrown), or in the
//   awaiter's destructor when the frame is destroyed while it waits. Released any earlier, a second
//   wait could start, find the message still there and not park, and both would take it. Copies of a
//   receiver start with the flag clear: a copy is the way to wait twice.
// Threads: the two waits of `when_all(rx.recv(), rx.recv())` on a runtime run on two workers, so the
//   flag is atomic: claimed with an acquire exchange, released with a release store, so a claim that
//   follows a release also sees the position the released wait moved.
#include <atomic>
#include <coroutine>
#include <stdexcept>
#include <string>

#include <corio/detail/wait_list.hpp>

namespace corio::detail {

/// The flag a position-keeping receiver carries. Not copied: every copy starts clear.
class lone_wait {
 public:
  lone_wait() noexcept = default;
  lone_wait(const lone_wait&) noexcept {}
  lone_wait& operator=(const lone_wait&) noexcept { return *this; }
  ~lone_wait() = default;

  /// Throws std::logic_error naming `operation` if a wait is already in flight.
  void claim(const char* operation) {
    if (busy_.exchange(true, std::memory_order_acquire)) {  // pairs with the release in release()
      throw std::logic_error(std::string(operation) +
                             ": another wait on this receiver is in flight (one at a time per receiver "
                             "object; copy the receiver to wait on it twice)");
    }
  }
  void release() noexcept { busy_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> busy_{false};
};

/// A waiter whose context is a `Receiver` with a `lone_wait lone_` member and a `wait_name`.
template <class Receiver>
class lone_waiter : public waiter {
 public:
  using waiter::waiter;
  lone_waiter(const lone_waiter&) = delete;
  lone_waiter& operator=(const lone_waiter&) = delete;
  ~lone_waiter() {
    if (claimed_) {
      receiver().lone_.release();
    }
  }

  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> self) {
    receiver().lone_.claim(Receiver::wait_name);
    claimed_ = true;
    return waiter::await_suspend(self);
  }

 protected:
  Receiver& receiver() const noexcept { return *static_cast<Receiver*>(context()); }

  /// Releases the flag when destroyed: made first thing in await_resume, so the flag is held until
  /// await_resume has moved the receiver's position or thrown.
  class ending {
   public:
    explicit ending(lone_waiter& self) noexcept : self_(self) {}
    ending(const ending&) = delete;
    ending& operator=(const ending&) = delete;
    ~ending() {
      self_.claimed_ = false;
      self_.receiver().lone_.release();
    }

   private:
    lone_waiter& self_;
  };

 private:
  bool claimed_ = false;
};

}  // namespace corio::detail
