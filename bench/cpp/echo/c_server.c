// Shared set-up of the plain C echo servers (c_server.h).

#define _GNU_SOURCE
#include "c_server.h"

#include <errno.h>  // program_invocation_short_name (_GNU_SOURCE)
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

void echo_die(const char* format, ...) {
  va_list args;
  va_start(args, format);
  fprintf(stderr, "%s: ", program_invocation_short_name);
  vfprintf(stderr, format, args);
  fputc('\n', stderr);
  va_end(args);
  exit(1);
}

int echo_parse_port(int argc, char** argv) {
  if (argc != 3 || strcmp(argv[1], "--port") != 0) echo_die("usage: %s --port P", argv[0]);
  char* end = NULL;
  long port = strtol(argv[2], &end, 10);
  if (end == argv[2] || *end != '\0' || port < 1 || port > 65535) echo_die("bad port '%s'", argv[2]);
  return (int)port;
}

int echo_listen(int port, int nonblocking) {
  signal(SIGPIPE, SIG_IGN);
  struct rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0), 0);
  if (fd < 0) echo_die("socket: %s", strerror(errno));
  int one = 1;
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) echo_die("SO_REUSEADDR: %s", strerror(errno));
  struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, (struct sockaddr*)&address, sizeof address) != 0) echo_die("bind port %d: %s", port, strerror(errno));
  if (listen(fd, 4096) != 0) echo_die("listen: %s", strerror(errno));
  return fd;
}

void echo_nodelay(int fd) {
  int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) echo_die("TCP_NODELAY: %s", strerror(errno));
}
