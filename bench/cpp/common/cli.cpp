#include "cli.hpp"

#include <algorithm>

#include "check.hpp"

namespace lab {

namespace {

bool contains(const std::vector<std::string_view>& names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

cli::cli(int argc, char** argv, std::vector<std::string_view> options, std::vector<std::string_view> flags) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (!arg.starts_with("-") || arg.size() < 2) fail("unexpected argument: " + std::string(arg));
    std::string_view name = arg.substr(arg.starts_with("--") ? 2 : 1);
    if (contains(flags, name)) {
      flags_.emplace_back(name);
    } else if (contains(options, name)) {
      if (i + 1 >= argc) fail("missing value for --" + std::string(name));
      values_.emplace_back(std::string(name), argv[++i]);
    } else {
      fail("unknown option: " + std::string(arg));
    }
  }
}

std::string cli::text(std::string_view name, std::string_view fallback) const {
  for (const auto& [key, value] : values_)
    if (key == name) return value;
  return std::string(fallback);
}

std::uint64_t cli::number(std::string_view name, std::uint64_t fallback) const {
  std::string raw = text(name);
  if (raw.empty()) return fallback;
  std::uint64_t value = 0;
  for (char c : raw) {
    if (c == '_' || c == ',') continue;
    if (c < '0' || c > '9') fail("--" + std::string(name) + " wants a number, got " + raw);
    value = value * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return value;
}

bool cli::flag(std::string_view name) const {
  return std::find(flags_.begin(), flags_.end(), name) != flags_.end();
}

}  // namespace lab
