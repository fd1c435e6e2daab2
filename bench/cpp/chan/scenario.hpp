#pragma once
// The `chan` scenario (bench/scenarios.md), the part every C++ program of it shares: the command line,
// the event (C++'s sum type, std::variant), what a receiver does with each event, and the CSV row.
//
// Threads: event_source::make and consume may be called from any number of threads at once; the
// source is immutable after construction and the counter is one relaxed atomic.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

namespace lab::chan {

/// The exit marker a receiver checks every event against. No sender ever sends one.
struct exit_marker {};

/// One event: an integer, a string (owned), a pointer to the one shared string, or the exit marker.
using event = std::variant<std::int64_t, std::string, const std::string*, exit_marker>;

/// The four event types of the scenario (`-t`).
enum class etype { int_value, str, str_ptr, str_clone };

/// The command line: -w W -e E -q Q -t int|str|str_ptr|str_clone -s S [--threads T].
struct params {
  std::uint64_t workers = 0;   // W: channels, receivers and senders
  std::uint64_t events = 0;    // E: events per sender and receiver
  std::uint64_t capacity = 0;  // Q: channel capacity
  etype type = etype::int_value;
  std::string type_name;
  std::size_t string_size = 0;  // S: bytes in the shared string
  std::size_t threads = 0;      // runtime threads; 0 means the runtime's default (one per core)
};

/// Parses the command line; a bad one fails the run (prints why, exits 1).
params parse(int argc, char** argv);

/// Makes the events senders send. Holds the one shared string of S bytes, built before the clock.
class event_source {
 public:
  event_source(etype type, std::size_t string_size);

  /// The event with this sequence number: an int carries the number; str copies the shared string
  /// (std::string's ordinary copy); str_ptr points at it; str_clone copies its bytes explicitly.
  event make(std::uint64_t sequence) const {
    switch (type_) {
      case etype::int_value:
        return event(std::in_place_index<0>, static_cast<std::int64_t>(sequence));
      case etype::str:
        return event(std::in_place_index<1>, shared_);
      case etype::str_ptr:
        return event(std::in_place_index<2>, &shared_);
      case etype::str_clone:
        break;
    }
    return event(std::in_place_index<1>, std::string(shared_.data(), shared_.size()));
  }

 private:
  etype type_;
  std::string shared_;
};

/// A receiver's work per event: one relaxed increment of the shared counter and the exit-marker check.
/// Returns false for an exit marker, after which the receiver stops (and the count check fails).
inline bool consume(const event& received, std::atomic<std::uint64_t>& counter) {
  counter.fetch_add(1, std::memory_order_relaxed);
  return !std::holds_alternative<exit_marker>(received);
}

/// Resident bytes per idle channel and per task parked on a channel (bench/scenarios.md, Memory).
struct memory {
  double channel_bytes = 0;
  double task_bytes = 0;
};

/// Bytes per item from two anonymous-resident readings taken around creating `count` items.
double per_item(std::int64_t before, std::int64_t after, std::uint64_t count);

/// The self-check and the row: fails the run unless counter == W*E and the time is positive, else
/// prints `program,etype,worker,event,time,speed,channel_bytes,task_bytes`, where program is `base`
/// with threads 0 and `base-<T>t` otherwise (corio, corio-1t).
void report(std::string_view base, const params& p, double seconds, std::uint64_t counted, memory mem);

}  // namespace lab::chan
