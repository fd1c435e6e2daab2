// Command-line parsing shared by the networking examples: `--flag value` pairs, `--help`, and a bad
// flag or value reported with the flag's name, the usage line and exit status 2.
#pragma once
#include <corio/io_backend.hpp>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <system_error>

namespace example {

class flags {
 public:
  flags(const char* program, const char* usage_line) noexcept : program_(program), usage_line_(usage_line) {}

  /// Calls `take(flag, value)` for each pair; `take` returns false for a flag it does not know.
  /// `--help` prints the usage line and exits 0.
  template <class Take>
  void parse(int argc, char** argv, Take take) const {
    for (int i = 1; i < argc; ++i) {
      std::string_view flag = argv[i];
      if (flag == "--help" || flag == "-h") {
        std::fputs(usage_line_, stdout);
        std::exit(0);
      }
      if (i + 1 >= argc) {
        fail("no value after ", flag);
      }
      if (!take(flag, std::string_view(argv[++i]))) {
        fail("unknown flag ", flag);
      }
    }
  }

  /// The whole of `value` as a number in [low, high], or a failure naming `flag`.
  template <class Number>
  Number number(std::string_view flag, std::string_view value, Number low, Number high) const {
    Number number{};
    auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), number);
    // Written so that NaN, which from_chars accepts and every comparison rejects, fails too.
    if (error != std::errc() || end != value.data() + value.size() || !(number >= low && number <= high)) {
      fail("bad value for ", flag);
    }
    return number;
  }

  corio::io_backend backend(std::string_view value) const {
    if (value == "io_uring") {
      return corio::io_backend::io_uring;
    }
    if (value == "epoll") {
      return corio::io_backend::epoll;
    }
    if (value != "auto") {
      fail("unknown backend ", value);
    }
    return corio::io_backend::automatic;
  }

  [[noreturn]] void fail(std::string_view message, std::string_view what = {}) const {
    std::fprintf(stderr, "%s: %.*s%.*s\n%s", program_, static_cast<int>(message.size()), message.data(),
                 static_cast<int>(what.size()), what.data(), usage_line_);
    std::exit(2);
  }

 private:
  const char* program_;
  const char* usage_line_;
};

}  // namespace example
