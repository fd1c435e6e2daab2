// asio: the Asio echo server of the lab's `echo` experiment (bench/scenarios.md).
//
//   asio_server --port P
//
// What a C++ user would pick instead of corio: Debian's standalone Asio with C++20 coroutines, written
// the way Asio's own cpp20 coroutine examples are. One io_context with concurrency hint 1 (one thread
// runs it), an accept loop and one `co_spawn`ed coroutine per connection that `co_await`s
// `async_read_some` into its buffer and `async_write` of exactly what it read; TCP_NODELAY on every
// connection. Asio's default Linux backend (epoll) serves it.

#include <asio.hpp>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace {

using asio::ip::tcp;

constexpr std::size_t chunk = 16384;  // bytes one read may take, as in the C servers

[[noreturn]] void fail(std::string_view why) {
  std::fprintf(stderr, "asio_server: %.*s\n", static_cast<int>(why.size()), why.data());
  std::exit(1);
}

unsigned short parse_port(int argc, char** argv) {
  if (argc != 3 || std::string_view(argv[1]) != "--port") fail("usage: asio_server --port P");
  std::string_view text = argv[2];
  unsigned short port = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), port);
  if (error != std::errc{} || end != text.data() + text.size() || port == 0) fail("bad port");
  return port;
}

// Sends every chunk it reads straight back, until end of file or an error.
asio::awaitable<void> echo(tcp::socket socket) {
  char data[chunk];
  try {
    for (;;) {
      std::size_t n = co_await socket.async_read_some(asio::buffer(data), asio::use_awaitable);
      co_await asio::async_write(socket, asio::buffer(data, n), asio::use_awaitable);
    }
  } catch (const std::system_error&) {
    // end of file or a reset: the connection is over
  }
}

asio::awaitable<void> serve(tcp::acceptor& acceptor) {
  for (;;) {
    tcp::socket socket = co_await acceptor.async_accept(asio::use_awaitable);
    asio::error_code error;
    socket.set_option(tcp::no_delay(true), error);
    if (!error) asio::co_spawn(acceptor.get_executor(), echo(std::move(socket)), asio::detached);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const unsigned short port = parse_port(argc, argv);
  asio::io_context context(1);
  tcp::acceptor acceptor(context);
  try {
    tcp::endpoint endpoint(asio::ip::address_v4::loopback(), port);
    acceptor.open(endpoint.protocol());
    acceptor.set_option(tcp::acceptor::reuse_address(true));
    acceptor.bind(endpoint);
    acceptor.listen(4096);
  } catch (const std::system_error& error) {
    fail(error.what());
  }
  asio::co_spawn(context, serve(acceptor), [](std::exception_ptr failed) {
    if (failed) fail("the accept loop failed");
  });
  context.run();
  return 0;
}
