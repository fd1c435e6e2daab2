// A line-based chat room over TCP: every line a client sends goes to every other client, prefixed
// with the sender's address; joins and departures are announced.
//
//   chat_server [--port 7779] [--threads 1] [--backend auto|io_uring|epoll] [--history 256]
//   (--port 0: an ephemeral port, printed on the first line of output; --history: how many messages
//   the room keeps for clients that read slowly. One that falls further behind is told how many it
//   missed, "*** N message(s) missed", and goes on from the oldest message kept.)
//
// A line longer than 4096 bytes ends its sender's connection ("*** line too long"); a last line
// without its newline is delivered when its sender closes. Lines are delivered whole, each with a
// newline.
//
// Shows: a broadcast channel shared by every connection's task; one task per connection waiting
// for its socket and for the room at once with when_any (a read that loses keeps its bytes for the
// next read; a receive that loses takes nothing), on a runtime whose connections may run on any worker.
#include <corio/broadcast.hpp>
#include <corio/net/tcp_stream.hpp>
#include <corio/when_any.hpp>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <variant>

#include "example_server.hpp"

namespace {

constexpr std::size_t longest_line = 4096;

struct message {
  std::uint64_t from;  // the sending connection's number, 0 for the room's own announcements
  std::shared_ptr<const std::string> text;  // shared by every receiver's copy
};

std::optional<corio::broadcast_sender<message>> room;  // set before the server starts
std::atomic<std::uint64_t> connections_made{0};

void announce(std::uint64_t from, std::string text) {
  room->send(message{from, std::make_shared<const std::string>(std::move(text))});
}

// Splits what a client sends into lines; holds a partial line until its newline arrives.
class line_splitter {
 public:
  void add(std::string_view data) { pending_ += data; }

  /// How much of a line has arrived without its newline yet.
  std::size_t partial() const { return pending_.size() - done_; }

  /// The next complete line (without its newline), or nullopt.
  std::optional<std::string> next() {
    std::size_t end = pending_.find('\n', done_);
    if (end == std::string::npos) {
      pending_.erase(0, done_);
      done_ = 0;
      return std::nullopt;
    }
    std::string line = pending_.substr(done_, end - done_);
    done_ = end + 1;
    return line;
  }

  /// The last line, sent without a newline before the client closed, if any.
  std::optional<std::string> rest() {
    if (done_ == pending_.size()) {
      return std::nullopt;
    }
    std::string line = pending_.substr(done_);
    pending_.clear();
    done_ = 0;
    return line;
  }

 private:
  std::string pending_;
  std::size_t done_ = 0;  // pending_[0, done_) was handed out already
};

// The per-connection loop: whichever comes first, a chunk from the client or a message from the room.
corio::task<void> chat(corio::net::tcp_stream stream) {
  stream.set_nodelay(true);
  const std::uint64_t me = connections_made.fetch_add(1) + 1;
  std::error_code gone;
  const std::string name = stream.peer_endpoint(gone).to_string();
  if (gone) {
    co_return;  // reset before it was served
  }
  std::error_code error;  // the writes'; the read has its own, which it sets when it loses the when_any
  std::error_code read_error;
  auto inbox = room->subscribe();
  announce(0, "*** " + name + " joined\n");
  line_splitter lines;
  std::array<char, 4096> buffer;
  for (;;) {
    auto first = co_await corio::when_any(stream.read_some(std::as_writable_bytes(std::span(buffer)), read_error),
                                          inbox.recv());
    if (first.index() == 0) {
      std::size_t n = std::get<0>(first);
      if (n == 0 || read_error) {
        break;  // closed or reset
      }
      lines.add({buffer.data(), n});
      bool too_long = false;
      while (auto line = lines.next()) {
        too_long = line->size() > longest_line;
        if (too_long) {
          break;
        }
        announce(me, name + ": " + *line + "\n");
      }
      if (too_long || lines.partial() > longest_line) {
        co_await stream.write_all("*** line too long\n", error);
        lines = line_splitter{};  // none of it goes to the room
        break;
      }
      continue;
    }
    auto& received = std::get<1>(first);
    if (std::holds_alternative<corio::broadcast_closed>(received)) {
      break;  // the server is stopping
    }
    if (auto* missed = std::get_if<corio::lagged>(&received)) {
      const std::string notice = "*** " + std::to_string(missed->missed) + " message(s) missed\n";
      co_await stream.write_all(notice, error);
    } else if (auto& [from, text] = std::get<message>(received); from != me) {
      co_await stream.write_all(*text, error);
    }
    if (error) {
      break;
    }
  }
  if (auto last = lines.rest()) {
    announce(me, name + ": " + *last + "\n");
  }
  announce(0, "*** " + name + " left\n");
}

constexpr const char* usage_line =
    "usage: chat_server [--port N] [--threads N] [--backend auto|io_uring|epoll] [--history N]\n";

}  // namespace

int main(int argc, char** argv) {
  example::server_settings serving{.port = 7779};
  std::size_t history = 256;
  const example::flags flags("chat_server", usage_line);
  flags.parse(argc, argv, [&](std::string_view flag, std::string_view value) {
    if (serving.take(flags, flag, value)) {
      return true;
    }
    if (flag == "--history") {
      history = flags.number<std::size_t>(flag, value, 1, 1 << 20);
    } else {
      return false;
    }
    return true;
  });
  room = corio::broadcast<message>(history).first;  // the receiver made with it goes: each client subscribes
  return example::server("chat_server", chat).run(serving);
}
