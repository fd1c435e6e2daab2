#pragma once
// corio::net::tcp_stream: a connected TCP socket whose reads and writes suspend the awaiting task.
#include <atomic>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <corio/detail/read_exact_awaiter.hpp>
#include <corio/detail/socket.hpp>
#include <corio/net/endpoint.hpp>
#include <corio/net/error.hpp>
#include <corio/task.hpp>

namespace corio::net {

class tcp_stream;

namespace detail {

/// co_await tcp_stream::connect(...): a socket, then the connect operation; yields the stream.
class connect_awaiter : public corio::detail::io_awaiter {
 public:
  connect_awaiter(const endpoint& peer, std::error_code* error) noexcept;
  connect_awaiter(connect_awaiter&& other) noexcept = default;

  template <class Promise>
  bool await_suspend(std::coroutine_handle<Promise> self) {
    corio::detail::stop_state* stop = corio::detail::stop_token_of(self);
    if ((stop != nullptr && stop->stop_requested()) || !prepare()) {
      return finish_at_once(self, stop);  // cancelled (no socket opened), or socket() failed: op_.result holds why
    }
    return start(self, stop);
  }
  tcp_stream await_resume();

 private:
  bool prepare() noexcept;

  endpoint peer_;
  corio::detail::socket_fd socket_;
  corio::detail::io_source_ref source_;  // io_uring: the registered file (and multishot recv) state; released before the socket
};

}  // namespace detail

/// A connected TCP stream. Move-only; closes the socket when destroyed (RAII). Operations are
/// awaitables: they suspend the awaiting task until the kernel finishes (io_uring) or the socket is
/// ready (epoll), and resume it on the same event loop or runtime (on a runtime, possibly on
/// another worker). Each operation has two forms: the plain one throws std::system_error whose
/// message names the operation ("corio::net::tcp_stream::read_some: Connection reset by peer"); the
/// one taking a std::error_code& stores the error instead (an I/O backend that cannot be set up, a
/// configuration error, throws from both: corio/io_backend.hpp). Cancelling the task
/// (join_handle::cancel, when_any, with_timeout) cancels the operation in the kernel and completes
/// it with corio::cancelled (or std::errc::operation_canceled). Not thread-safe: one reader and one
/// writer at a time (a read or write started while another of its kind is in flight on the stream
/// throws std::logic_error rather than mix their bytes). Cancel an operation before closing or
/// destroying its stream; a pending read closed under, on any thread, still ends with
/// std::errc::operation_canceled (README, Limitations). On io_uring, the stream's reads go through
/// the registered file of the reactor that first read it (with CORIO_URING_MULTISHOT=all, from one
/// multishot recv into that reactor's buffer ring, which keeps data that arrives before a read); a
/// read from another worker of the same runtime is handed to that reactor's worker, and the task
/// resumes there; reading it from another event loop's or one-worker runtime's task fails with
/// corio::net::errc::served_by_another_reactor (every task there runs on one thread: nowhere to
/// hand the read to), and so does reading it from a several-worker runtime's task with
/// CORIO_URING_MULTISHOT=all (that reactor's multishot recv takes the data); it may be closed or
/// destroyed anywhere.
///
///     auto stream = co_await corio::net::tcp_stream::connect(*corio::net::endpoint::parse("127.0.0.1:7"));
///     co_await stream.write_all("ping\n");
///     std::array<std::byte, 64> reply;
///     std::size_t n = co_await stream.read_some(reply);   // 0: the peer closed
class tcp_stream {
 public:
  tcp_stream() noexcept = default;
  /// Moving a stream, even with an operation in flight on it, leaves that operation working on the
  /// stream in its new place (see "Moving" below).
  tcp_stream(tcp_stream&& other) noexcept = default;
  /// Closes this one first (its io_uring state before its socket), then takes `other`'s.
  tcp_stream& operator=(tcp_stream&& other) noexcept {
    if (this != &other) {
      close();
      socket_ = std::move(other.socket_);
      state_ = std::move(other.state_);
    }
    return *this;
  }
  ~tcp_stream() {
    if (state_ != nullptr) {
      state_->source.reset();  // its io_uring state before its socket, as close() does
    }
  }
  /// Adopts a connected, non-blocking socket descriptor. Throws std::bad_alloc (and closes `fd`).
  explicit tcp_stream(int fd) : state_(state_for(fd)), socket_(fd) {}

  /// Connects to `peer`; co_await yields the connected stream.
  static detail::connect_awaiter connect(const endpoint& peer) noexcept { return {peer, nullptr}; }
  /// As above; on failure stores the error and yields a closed stream.
  static detail::connect_awaiter connect(const endpoint& peer, std::error_code& error) noexcept {
    return {peer, &error};
  }
  /// Connects to each of `peers` in turn until one accepts, as Go's net.Dial and tokio's
  /// TcpStream::connect do with the addresses of a name. When every one fails: the last one's error,
  /// the message naming the operation and that address (an empty list: errc::invalid_argument). A
  /// cancellation ends it at once, without trying the addresses left.
  static task<tcp_stream> connect(std::vector<endpoint> peers);
  static task<tcp_stream> connect(std::vector<endpoint> peers, std::error_code& error);
  /// Resolves `host` with corio::net::resolve (a name, as opposed to an address, needs a runtime or an
  /// event loop) and connects to its addresses in turn, as above. The error_code form stores resolve's
  /// errors, and a cancellation or deadline during the lookup, too. A name awaited on a plain thread
  /// (sync_wait) makes either form throw std::logic_error, a misuse; a numeric address works anywhere.
  static task<tcp_stream> connect(std::string host, std::uint16_t port);
  static task<tcp_stream> connect(std::string host, std::uint16_t port, std::error_code& error);

  /// Reads what is available, at least one byte, into `buffer`; yields the count, 0 if the peer
  /// closed its side (or at once if `buffer` is empty). Cancel-safe: a read that ends cancelled or
  /// timed out (join_handle::cancel, a when_any branch that lost, with_timeout) consumed nothing; bytes
  /// the kernel delivered to it anyway are returned by the stream's next read.
  corio::detail::transfer_awaiter read_some(std::span<std::byte> buffer) noexcept {
    return {corio::detail::io_kind::recv, socket_.id(), buffer.data(), buffer.size(), read_some_name, nullptr,
            source(), stash()};
  }
  corio::detail::transfer_awaiter read_some(std::span<std::byte> buffer, std::error_code& error) noexcept {
    return {corio::detail::io_kind::recv, socket_.id(), buffer.data(), buffer.size(), read_some_name, &error,
            source(), stash()};
  }

  /// Writes some of `data` (at least one byte unless it is empty); yields the count.
  corio::detail::transfer_awaiter write_some(std::span<const std::byte> data) noexcept {
    return {corio::detail::io_kind::send, socket_.id(), data.data(), data.size(), write_some_name, nullptr,
            source()};
  }
  corio::detail::transfer_awaiter write_some(std::span<const std::byte> data, std::error_code& error) noexcept {
    return {corio::detail::io_kind::send, socket_.id(), data.data(), data.size(), write_some_name, &error,
            source()};
  }

  /// Fills `buffer` completely. If the peer closes first: throws std::system_error with
  /// errc::end_of_stream (the error_code form stores it); yields how many bytes it read either way.
  /// Cancel-safe like read_some: cancelled or timed out, it consumed nothing (the bytes it had read
  /// are returned by the stream's next read) and the error_code form yields 0; that holds for one that
  /// finished reading as its task was being cancelled too, and for one that loses a when_any on any
  /// executor. An awaitable (a task inside, detail/read_exact_awaiter.hpp), not a task: await it, race
  /// it in when_any, or bound it with with_timeout; wrap it in a task to spawn it. Like read_some's
  /// awaiter, it takes what it needs of the stream when it is made: the stream may be moved (into a
  /// vector that grows) before it is awaited or while it runs.
  corio::detail::read_exact_awaiter read_exact(std::span<std::byte> buffer);
  corio::detail::read_exact_awaiter read_exact(std::span<std::byte> buffer, std::error_code& error);

  /// Writes all of `data`, however many writes that takes (the reactor issues them; the task resumes
  /// once); a slow reader suspends the task (the kernel's send buffer is the only buffer: memory stays
  /// bounded). Yields the bytes written: all of them, or, in the error_code form, how many went out
  /// before the error. `data` must stay valid until the write finishes.
  corio::detail::send_all_awaiter write_all(std::span<const std::byte> data) noexcept {
    return {socket_.id(), data.data(), data.size(), write_all_name, nullptr, source()};
  }
  corio::detail::send_all_awaiter write_all(std::span<const std::byte> data, std::error_code& error) noexcept {
    return {socket_.id(), data.data(), data.size(), write_all_name, &error, source()};
  }
  corio::detail::send_all_awaiter write_all(std::string_view text) noexcept {
    return write_all(std::as_bytes(std::span(text)));
  }
  corio::detail::send_all_awaiter write_all(std::string_view text, std::error_code& error) noexcept {
    return write_all(std::as_bytes(std::span(text)), error);
  }
  /// A char array is text, as a literal is: written up to its first NUL, and never past its end (as
  /// a pointer it would be measured by strlen). Bytes with NULs among them: std::as_bytes(std::span(a)).
  template <std::size_t N>
  corio::detail::send_all_awaiter write_all(const char (&text)[N]) noexcept {
    std::string_view whole(text, N);
    return write_all(whole.substr(0, whole.find('\0')));
  }
  template <std::size_t N>
  corio::detail::send_all_awaiter write_all(const char (&text)[N], std::error_code& error) noexcept {
    std::string_view whole(text, N);
    return write_all(whole.substr(0, whole.find('\0')), error);
  }

  /// Shuts down one or both directions (SHUT_WR: a half-close, the peer reads end of stream).
  /// Synchronous. Throws std::system_error, or stores the error.
  void shutdown(int how = SHUT_WR);
  void shutdown(int how, std::error_code& error) noexcept;

  /// TCP_NODELAY: send small writes at once instead of coalescing them (Nagle).
  void set_nodelay(bool enabled);
  void set_nodelay(bool enabled, std::error_code& error) noexcept;

  /// The socket's own address, and its peer's. A peer that reset the connection (even before it was
  /// accepted) has none any more: getpeername fails with ENOTCONN, which the error_code form stores.
  endpoint local_endpoint() const;
  endpoint local_endpoint(std::error_code& error) const noexcept;
  endpoint peer_endpoint() const;
  endpoint peer_endpoint(std::error_code& error) const noexcept;

  bool is_open() const noexcept { return socket_.is_open(); }
  int native_handle() const noexcept { return socket_.get(); }
  /// Closes the socket now (the destructor does it otherwise).
  void close() noexcept {
    if (state_ != nullptr) {
      state_->source.close();  // the state stays allocated until the object goes: detail/io_source.hpp, "Lifetime"
    }
    socket_.reset();  // bytes a cancelled read kept stay until the object goes: a read may be starting
  }

 private:
  static constexpr const char* read_some_name = "corio::net::tcp_stream::read_some";
  static constexpr const char* write_some_name = "corio::net::tcp_stream::write_some";
  static constexpr const char* write_all_name = "corio::net::tcp_stream::write_all";
  static constexpr const char* read_exact_name = "corio::net::tcp_stream::read_exact";

  static task<std::size_t> read_exact_into(corio::detail::socket_id socket, corio::detail::read_stash* stash,
                                           std::atomic<corio::detail::io_source*>* source,
                                           std::span<std::byte> buffer, std::error_code* error);
  static task<tcp_stream> connect_each(std::vector<endpoint> peers, std::error_code* error);
  static task<tcp_stream> connect_to_host(std::string host, std::uint16_t port, std::error_code* error);

  // Moving. What an operation in flight points at lives in one allocation the stream owns, not in the
  // stream object: a stream moved under an operation (into a vector that grows, out of a unique_ptr
  // that is then reset) takes it along, so the operation's later sends (a write_all, on io_uring)
  // find its io_uring state, and bytes a cancelled read took go to the stream in its new place. A
  // stream with no socket (default-constructed, moved from) has none: its operations fail with
  // bad_file_descriptor before they would use it.
  struct state {
    corio::detail::read_stash stash;       // bytes read for a cancelled read, returned by the next one
    corio::detail::io_source_ref source;   // io_uring: the registered file (and multishot recv) state; released before the socket
  };
  /// A new state for the socket `fd`; closes `fd` if it cannot be allocated (std::bad_alloc).
  static std::unique_ptr<state> state_for(int fd);
  std::atomic<corio::detail::io_source*>* source() noexcept { return state_ != nullptr ? state_->source.slot() : nullptr; }
  corio::detail::read_stash* stash() noexcept { return state_ != nullptr ? &state_->stash : nullptr; }

  // Declared first, destroyed last: after the socket's close, which waits for a read keeping bytes
  // in its stash on another thread (keep_while_open).
  std::unique_ptr<state> state_;
  corio::detail::socket_fd socket_;
};

}  // namespace corio::net
