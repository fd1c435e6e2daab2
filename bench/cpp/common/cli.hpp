#pragma once
// Tiny command-line reader shared by the lab executables: `--name value` options and `--flag`s.
// One dash works as well as two (`-w 100`), for the scenarios whose original programs used short
// options. Unknown options are an error so a typo in the driver cannot silently run the wrong cell.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lab {

class cli {
 public:
  cli(int argc, char** argv, std::vector<std::string_view> options, std::vector<std::string_view> flags);

  /// The value of `--name`, or `fallback` when it was not given.
  std::string text(std::string_view name, std::string_view fallback = {}) const;
  /// The value of `--name` as an unsigned integer (digits, `_` and `,` allowed), or `fallback`.
  std::uint64_t number(std::string_view name, std::uint64_t fallback) const;
  /// True when `--name` was given.
  bool flag(std::string_view name) const;

 private:
  std::vector<std::pair<std::string, std::string>> values_;
  std::vector<std::string> flags_;
};

}  // namespace lab
