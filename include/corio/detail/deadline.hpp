#pragma once
// The deadline a duration names from now, without overflow: what sleep_for, with_timeout, after and
// the channels' *_blocking_for compute.
#include <chrono>

namespace corio::detail {

/// `Clock::now() + duration`, saturated. A duration at or past what the clock can still add (such as
/// std::chrono::seconds::max() or hours::max(), used to mean "no limit" the way tokio's Duration::MAX
/// is) gives Clock::time_point::max(), a deadline that never comes, where the plain sum would
/// overflow into the past and fire at once. A negative duration gives now, and so does a floating-point
/// NaN (converting it to the clock's integer ticks would be undefined).
template <class Clock, class Rep, class Period>
typename Clock::time_point deadline_after(std::chrono::duration<Rep, Period> duration) noexcept {
  using seconds = std::chrono::duration<double>;
  const typename Clock::time_point now = Clock::now();
  if (!(duration > duration.zero())) {  // negative, zero, or NaN
    return now;
  }
  // In floating point, which cannot overflow here; the 1 s margin covers its rounding.
  const seconds room = Clock::time_point::max() - now;
  if (std::chrono::duration_cast<seconds>(duration) >= room - seconds(1)) {
    return Clock::time_point::max();
  }
  return now + std::chrono::duration_cast<typename Clock::duration>(duration);
}

}  // namespace corio::detail
