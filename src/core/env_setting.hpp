#pragma once
// Tuning knobs read from the environment (CORIO_FRAME_POOL, CORIO_URING_MULTISHOT,
// CORIO_URING_BUFFERS): one reader, so that every knob treats a value it does not understand the
// same way. CORIO_BACKEND is not one of them: it forces a contract (which backend runs), and a bad
// value there is an error (reactor.cpp).
//
// Design note.
// Rule: unset or empty means the default. A value the knob does not know ("false" for an on/off
//   switch, "abc" or "0" for a count) prints one line to stderr naming the variable, the value, what
//   it accepts and what is used instead, and the default is used; a count above its largest value
//   uses the largest, with the same line. The run goes on: a knob changes how fast corio is, or what
//   a debugger sees, never what a program computes, so a typo must not stop it, but it must not be
//   silent either (CORIO_FRAME_POOL=false once left the pool on, hiding every frame's lifetime from
//   AddressSanitizer, without a word).
// Threads: any. Each knob's warning is printed once per process (an atomic flag at its call site),
//   however many reactors or threads read it. Nothing allocates: the readers are noexcept, for the
//   noexcept set-up paths that call them.
#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string_view>

namespace corio::detail {

/// One environment variable and whether its warning was printed.
struct env_knob {
  const char* name;
  std::atomic<bool> warned{false};
};

/// One accepted spelling of a choice and the value it stands for.
struct env_word {
  std::string_view text;
  int value;
};

/// The value of `knob` among `words` (exact, case-sensitive), or `fallback` (whose spelling is
/// `fallback_text`) when unset, empty or unknown; an unknown value is reported as the note says.
int env_choice(env_knob& knob, std::initializer_list<env_word> words, int fallback,
               std::string_view fallback_text) noexcept;

/// `text` read as a whole decimal number, all of it, with nothing around it: null if it is not one
/// (empty, signs, spaces, trailing characters); one too large for 64 bits reads as the largest that fits.
std::optional<std::uint64_t> parse_whole_number(std::string_view text) noexcept;

/// The value of `knob` as a count from 1 to `largest`: `fallback` when unset or empty, or when the
/// value is not a whole number or is 0 (reported); `largest` when it is larger (reported).
std::uint64_t env_count(env_knob& knob, std::uint64_t fallback, std::uint64_t largest) noexcept;

}  // namespace corio::detail
