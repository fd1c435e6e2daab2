#include "core/env_setting.hpp"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace corio::detail {
namespace {

// The variable's value, or null when unset or empty.
const char* value_of(const env_knob& knob) noexcept {
  const char* text = std::getenv(knob.name);
  return text != nullptr && *text != '\0' ? text : nullptr;
}

// Whether this is the knob's first report (it prints, with stdio only: nothing here allocates, so
// the readers stay noexcept).
bool first_report(env_knob& knob) noexcept { return !knob.warned.exchange(true, std::memory_order_relaxed); }

}  // namespace

int env_choice(env_knob& knob, std::initializer_list<env_word> words, int fallback,
               std::string_view fallback_text) noexcept {
  const char* text = value_of(knob);
  if (text == nullptr) {
    return fallback;
  }
  for (const env_word& word : words) {
    if (word.text == text) {
      return word.value;
    }
  }
  if (first_report(knob)) {
    std::fprintf(stderr, "corio: %s=%s is not ", knob.name, text);
    std::size_t i = 0;
    for (const env_word& word : words) {
      const char* separator = i == 0 ? "" : (i + 1 == words.size() ? " or " : ", ");
      std::fprintf(stderr, "%s%.*s", separator, static_cast<int>(word.text.size()), word.text.data());
      ++i;
    }
    std::fprintf(stderr, "; using %.*s\n", static_cast<int>(fallback_text.size()), fallback_text.data());
  }
  return fallback;
}

std::optional<std::uint64_t> parse_whole_number(std::string_view text) noexcept {
  const char* end = text.data() + text.size();
  std::uint64_t value = 0;
  auto [stop, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || stop != end) {
    return std::nullopt;  // not digits, or something after them (from_chars takes no sign or space)
  }
  if (error == std::errc::result_out_of_range) {
    return std::numeric_limits<std::uint64_t>::max();
  }
  return value;
}

std::uint64_t env_count(env_knob& knob, std::uint64_t fallback, std::uint64_t largest) noexcept {
  const char* text = value_of(knob);
  if (text == nullptr) {
    return fallback;
  }
  std::optional<std::uint64_t> value = parse_whole_number(text);
  if (value && *value != 0 && *value <= largest) {
    return *value;
  }
  const std::uint64_t used = value && *value > largest ? largest : fallback;
  if (first_report(knob)) {
    std::fprintf(stderr, "corio: %s=%s is not a whole number from 1 to %llu; using %llu\n", knob.name, text,
                 static_cast<unsigned long long>(largest), static_cast<unsigned long long>(used));
  }
  return used;
}

}  // namespace corio::detail
