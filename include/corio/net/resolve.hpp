#pragma once
// corio::net::resolve: host names to endpoints, without blocking a worker.
#include <cstdint>
#include <string>
#include <vector>

#include <corio/net/endpoint.hpp>
#include <corio/task.hpp>

namespace corio::net {

/// Resolves `host` (a name, or a numeric IPv4/IPv6 address, the IPv6 one bare or in brackets as in
/// "[::1]") to the endpoints with `port`, in the order getaddrinfo prefers (TCP, both families). A
/// numeric host is parsed at once, anywhere, by endpoint::parse(host, port). A name is looked up with
/// getaddrinfo on the blocking pool of the runtime or event loop (spawn_blocking), so the worker or
/// loop keeps running other tasks; on a plain thread (sync_wait), which has none, a name throws
/// std::logic_error.
/// Failure throws std::system_error in resolve_category() naming "corio::net::resolve" and the host,
/// with a hint when the host looks like "host:port" (the port is the separate argument). A host holding
/// a NUL character fails so at once (EAI_NONAME), before any parse or lookup, on a loop too. The lookup
/// itself cannot be cancelled once started (getaddrinfo cannot be interrupted).
///
///     auto endpoints = co_await corio::net::resolve("localhost", 8080);
task<std::vector<endpoint>> resolve(std::string host, std::uint16_t port);

}  // namespace corio::net
