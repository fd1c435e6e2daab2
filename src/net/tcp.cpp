// corio::net::tcp_stream and tcp_listener: the synchronous parts and the multi-step operations.
#include <corio/net/tcp_listener.hpp>
#include <corio/net/tcp_stream.hpp>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include <corio/detail/promise_base.hpp>
#include <corio/errors.hpp>
#include <corio/net/resolve.hpp>

#include "net/socket_name.hpp"

namespace corio::net {
namespace {

using detail::or_throw;
using detail::socket_name;

// What an operation's error_code form stores when its task was cancelled or its deadline passed:
// std::make_error_code(std::errc::...), the generic category. The kernel's own ETIMEDOUT (a peer that
// never answered a SYN, a keepalive that went unanswered) comes in the system category, and is an
// ordinary failure: it compares equal to std::errc::timed_out all the same, so the category decides.
bool ended_by_cancellation(const std::error_code& error) noexcept {
  return error.category() == std::generic_category() && (error.value() == ECANCELED || error.value() == ETIMEDOUT);
}

}  // namespace

// --- connect --------------------------------------------------------------------------------------

namespace detail {

connect_awaiter::connect_awaiter(const endpoint& peer, std::error_code* error) noexcept
    : io_awaiter("corio::net::tcp_stream::connect", error), peer_(peer) {
  op_.kind = corio::detail::io_kind::connect;
}

bool connect_awaiter::prepare() noexcept {
  int fd = corio::detail::open_socket(peer_.family(), SOCK_STREAM);
  if (fd < 0) {
    op_.result = fd;
    return false;
  }
  socket_.reset(fd);
  target(socket_.id());
  op_.buffer = const_cast<sockaddr*>(peer_.data());
  op_.length = peer_.size();
  return true;
}

tcp_stream connect_awaiter::await_resume() {
  try {
    if (!check()) {
      return tcp_stream();
    }
  } catch (const std::system_error& failure) {  // names the address, as the forms trying several do
    throw std::system_error(failure.code(), "corio::net::tcp_stream::connect to " + peer_.to_string());
  }
  return tcp_stream(socket_.release());
}

}  // namespace detail

// --- tcp_stream -----------------------------------------------------------------------------------

// The first address that accepts wins. A cancellation (the single connect's error_code form reports it
// as operation_canceled, or timed_out for a deadline's stop) ends the attempts: the throwing form then
// throws corio::cancelled, which a with_timeout around this task turns into corio::timed_out.
task<tcp_stream> tcp_stream::connect_each(std::vector<endpoint> peers, std::error_code* error) {
  std::error_code last = std::make_error_code(std::errc::invalid_argument);  // no address to try
  for (const endpoint& peer : peers) {
    tcp_stream stream = co_await connect(peer, last);
    if (!last) {
      if (error != nullptr) {
        error->clear();
      }
      co_return stream;
    }
    if (ended_by_cancellation(last)) {
      if (error == nullptr) {
        throw cancelled();
      }
      break;
    }
  }
  if (error != nullptr) {
    *error = last;
    co_return tcp_stream();
  }
  if (peers.empty()) {
    throw std::system_error(last, "corio::net::tcp_stream::connect: no address to connect to");
  }
  std::string what = "corio::net::tcp_stream::connect to " + peers.back().to_string();
  if (peers.size() > 1) {
    what += " (the last of " + std::to_string(peers.size()) + " addresses tried)";
  }
  throw std::system_error(last, what);
}

task<tcp_stream> tcp_stream::connect(std::vector<endpoint> peers) { return connect_each(std::move(peers), nullptr); }

task<tcp_stream> tcp_stream::connect(std::vector<endpoint> peers, std::error_code& error) {
  return connect_each(std::move(peers), &error);
}

// The error_code form reports a lookup cancelled or timed out as connect_each reports a connect that
// was: operation_canceled, or timed_out when a deadline's stop did it.
task<tcp_stream> tcp_stream::connect_to_host(std::string host, std::uint16_t port, std::error_code* error) {
  std::vector<endpoint> peers;
  bool lookup_cancelled = false;
  try {
    peers = co_await resolve(std::move(host), port);
  } catch (const std::system_error& failure) {
    if (error == nullptr) {
      throw;
    }
    *error = failure.code();
    co_return tcp_stream();
  } catch (const cancelled&) {
    if (error == nullptr) {
      throw;
    }
    lookup_cancelled = true;
  }
  if (lookup_cancelled) {
    corio::detail::stop_state* stop = co_await corio::detail::current_stop_token{};
    bool deadline = stop != nullptr && stop->stopped_by_deadline();
    *error = std::make_error_code(deadline ? std::errc::timed_out : std::errc::operation_canceled);
    co_return tcp_stream();
  }
  co_return co_await connect_each(std::move(peers), error);
}

task<tcp_stream> tcp_stream::connect(std::string host, std::uint16_t port) {
  return connect_to_host(std::move(host), port, nullptr);
}

task<tcp_stream> tcp_stream::connect(std::string host, std::uint16_t port, std::error_code& error) {
  return connect_to_host(std::move(host), port, &error);
}

std::unique_ptr<tcp_stream::state> tcp_stream::state_for(int fd) {
  try {
    return std::make_unique<state>();
  } catch (...) {
    corio::detail::close_socket(fd);
    throw;
  }
}

// Cancelled part-way (a read_some step ended cancelled or timed out, and kept in the stash whatever it
// received), it puts back what the earlier steps read, ahead of that: the stream loses nothing.
// A stream destroyed under it (a misuse) took its stash along: then the bytes are dropped, and the
// stream is never touched (keep_while_open). One moved under it took its stash along too (it is not
// in the object): the bytes go to it in its new place. What it uses of the stream is captured when
// read_exact is called, not when the task starts, so the stream may move in between as well.
task<std::size_t> tcp_stream::read_exact_into(corio::detail::socket_id socket, corio::detail::read_stash* stash,
                                              std::atomic<corio::detail::io_source*>* source,
                                              std::span<std::byte> buffer, std::error_code* error) {
  std::size_t done = 0;
  while (done < buffer.size()) {
    std::size_t step = 0;
    try {
      step = co_await corio::detail::transfer_awaiter(corio::detail::io_kind::recv, socket, buffer.data() + done,
                                                      buffer.size() - done, read_exact_name, error, source, stash);
    } catch (const cancelled&) {
      corio::detail::give_back_read(socket, stash, buffer.first(done));
      throw;
    }
    if (error != nullptr && *error) {
      if (ended_by_cancellation(*error)) {
        corio::detail::give_back_read(socket, stash, buffer.first(done));
        co_return 0;
      }
      co_return done;
    }
    if (step == 0) {  // the peer closed early
      if (error != nullptr) {
        *error = make_error_code(errc::end_of_stream);
        co_return done;
      }
      throw std::system_error(make_error_code(errc::end_of_stream), read_exact_name);
    }
    done += step;
  }
  if (error != nullptr) {
    error->clear();
  }
  co_return done;
}

corio::detail::read_exact_awaiter tcp_stream::read_exact(std::span<std::byte> buffer) {
  corio::detail::socket_id socket = socket_.id();
  return {read_exact_into(socket, stash(), source(), buffer, nullptr), socket, stash(), buffer, nullptr};
}

corio::detail::read_exact_awaiter tcp_stream::read_exact(std::span<std::byte> buffer, std::error_code& error) {
  corio::detail::socket_id socket = socket_.id();
  return {read_exact_into(socket, stash(), source(), buffer, &error), socket, stash(), buffer, &error};
}

void tcp_stream::shutdown(int how) {
  or_throw("corio::net::tcp_stream::shutdown", [&](std::error_code& error) {
    shutdown(how, error);
    return 0;
  });
}

void tcp_stream::shutdown(int how, std::error_code& error) noexcept {
  if (::shutdown(socket_.get(), how) < 0) {
    error.assign(errno, std::system_category());
  } else {
    error.clear();
  }
}

void tcp_stream::set_nodelay(bool enabled) {
  or_throw("corio::net::tcp_stream::set_nodelay", [&](std::error_code& error) {
    set_nodelay(enabled, error);
    return 0;
  });
}

void tcp_stream::set_nodelay(bool enabled, std::error_code& error) noexcept {
  int value = enabled ? 1 : 0;
  if (::setsockopt(socket_.get(), IPPROTO_TCP, TCP_NODELAY, &value, sizeof(value)) < 0) {
    error.assign(errno, std::system_category());
  } else {
    error.clear();
  }
}

endpoint tcp_stream::local_endpoint() const {
  return socket_name(socket_.get(), false, "corio::net::tcp_stream::local_endpoint");
}

endpoint tcp_stream::local_endpoint(std::error_code& error) const noexcept {
  return socket_name(socket_.get(), false, error);
}

endpoint tcp_stream::peer_endpoint() const {
  return socket_name(socket_.get(), true, "corio::net::tcp_stream::peer_endpoint");
}

endpoint tcp_stream::peer_endpoint(std::error_code& error) const noexcept {
  return socket_name(socket_.get(), true, error);
}

// --- tcp_listener ---------------------------------------------------------------------------------

tcp_listener tcp_listener::bind(const endpoint& local, listen_options options) {
  return or_throw("corio::net::tcp_listener::bind to " + local.to_string(),
                  [&](std::error_code& error) { return bind(local, options, error); });
}

tcp_listener tcp_listener::bind(const endpoint& local, listen_options options, std::error_code& error) noexcept {
  tcp_listener listener;
  listener.socket_ = detail::open_bound(local, SOCK_STREAM, error, [&](int fd) {
    int one = 1;
    return (!options.reuse_address || ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0) &&
           (!options.reuse_port || ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) == 0);
  });
  if (!error && ::listen(listener.socket_.get(), options.backlog) < 0) {
    error.assign(errno, std::system_category());
    listener.close();
  }
  if (!error) {
    try {
      listener.source_ = std::make_unique<corio::detail::io_source_ref>();
      listener.stash_ = std::make_shared<corio::detail::accept_stash>();
    } catch (const std::bad_alloc&) {
      error = std::make_error_code(std::errc::not_enough_memory);
      listener.close();
    }
  }
  return listener;
}

endpoint tcp_listener::local_endpoint() const {
  return socket_name(socket_.get(), false, "corio::net::tcp_listener::local_endpoint");
}

endpoint tcp_listener::local_endpoint(std::error_code& error) const noexcept {
  return socket_name(socket_.get(), false, error);
}

}  // namespace corio::net
