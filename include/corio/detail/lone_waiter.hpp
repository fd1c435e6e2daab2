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
// State: a `lone_wait` flag in the receiver, set from the start of a wait (await_suspend) to its end
//   (await_resume, or the awaiter's destructor when the frame is destroyed while it waits). Copies of
//   a receiver start with the flag clear: a copy is the way to wait twice.
// Threads: one task uses a handle object at a time (the channels' rule), and a task's later steps
//   happen after its earlier ones, wherever each ran, so the flag is a plain bool.
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
    if (busy_) {
      throw std::logic_error(std::string(operation) +
                             ": another wait on this receiver is in flight (one at a time per receiver "
                             "object; copy the receiver to wait on it twice)");
    }
    busy_ = true;
  }
  void release() noexcept { busy_ = false; }

 private:
  bool busy_ = false;
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

  /// Ends the wait: releases the flag, then returns if it completed or throws corio::cancelled.
  void end_wait() {
    claimed_ = false;
    receiver().lone_.release();
    waiter::await_resume();
  }

 private:
  bool claimed_ = false;
};

}  // namespace corio::detail
