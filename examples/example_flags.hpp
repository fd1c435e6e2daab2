// Command-line parsing shared by the networking examples: `--flag value` pairs, `--help`, and a bad
// flag or value reported with the flag's name, the usage line and exit status 2.
#pragma once
#include <corio/io_backend.hpp>
#include <corio/runtime.hpp>

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
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

  /// The whole of `value` as seconds in [least, most], to the millisecond: a positive value under a
  /// millisecond, which would round to none, fails too.
  std::chrono::milliseconds seconds(std::string_view flag, std::string_view value, double least,
                                    double most = 86400.0) const {
    const double seconds = number<double>(flag, value, least, most);
    if (seconds > 0 && seconds < 0.001) {
      fail("bad value for ", flag);
    }
    return std::chrono::milliseconds(std::lround(seconds * 1000));
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

/// The flags every example that runs a runtime takes: --threads (its workers) and --backend.
struct runtime_settings {
  unsigned threads = 1;
  corio::io_backend backend = corio::io_backend::automatic;

  /// Takes `flag` if it is one of these; false for any other.
  bool take(const flags& parsing, std::string_view flag, std::string_view value) {
    if (flag == "--threads") {
      threads = parsing.number<unsigned>(flag, value, 1, 1024);
    } else if (flag == "--backend") {
      backend = parsing.backend(value);
    } else {
      return false;
    }
    return true;
  }

  corio::runtime::options options() const {
    corio::runtime::options made;
    made.workers = threads;
    made.backend = backend;
    return made;
  }
};

/// The flags a client example takes: where its server is (--host, 127.0.0.1 by default, and --port, which
/// require_port insists on) and its runtime's.
struct client_settings {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;
  runtime_settings runtime = {};

  /// Takes `flag` if it is one of these; false for any other.
  bool take(const flags& parsing, std::string_view flag, std::string_view value) {
    if (flag == "--host") {
      host = value;
    } else if (flag == "--port") {
      port = parsing.number<std::uint16_t>(flag, value, 1, 65535);
    } else {
      return runtime.take(parsing, flag, value);
    }
    return true;
  }

  /// Once the flags are parsed: a failure if --port was not among them.
  void require_port(const flags& parsing) const {
    if (port == 0) {
      parsing.fail("--port is required");
    }
  }
};

}  // namespace example
