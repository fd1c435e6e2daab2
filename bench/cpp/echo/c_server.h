#pragma once
// What the two plain C echo servers of the lab's `echo` experiment share (bench/scenarios.md): the
// command line, the listening socket, per-connection socket options. Nothing here is on the hot path.

#include <stddef.h>

// Bytes one read (recv) may take: the servers echo each received chunk whole, whatever its size.
enum { ECHO_CHUNK = 16384 };

/// Prints "<program>: <message>" to stderr and exits 1.
_Noreturn void echo_die(const char* format, ...);

/// The value of `--port P` (the only option the servers take); exits with a usage line otherwise.
int echo_parse_port(int argc, char** argv);

/// A listening TCP socket on 127.0.0.1:port (SO_REUSEADDR, backlog 4096), non-blocking if asked (the
/// epoll server wants it, io_uring would hand EAGAIN back); SIGPIPE is ignored from here on and
/// RLIMIT_NOFILE raised to its hard limit, so hundreds of clients fit.
int echo_listen(int port, int nonblocking);

/// Sets TCP_NODELAY on an accepted connection.
void echo_nodelay(int fd);
