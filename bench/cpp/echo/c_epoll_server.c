// c-epoll: the plain epoll echo server of the lab's `echo` experiment (bench/scenarios.md).
//
//   c_epoll_server --port P [--spin-us US]
//
// One thread, one level-triggered epoll set, non-blocking sockets. A readable connection gets one
// recv into a shared chunk buffer and the chunk is sent straight back; only when the socket cannot
// take it all is the rest copied aside, the connection watched for EPOLLOUT instead of EPOLLIN (so
// it reads nothing more until its echo is out), and finished when writable. That is what an epoll
// server tuned for request/response does: one recv and one send per echo, epoll_wait only to wait.
// Edge-triggered mode would cost an extra recv returning EAGAIN on every echo; it is not used.
//
// --spin-us US (the `c-epoll-spin` row; 0, the default, is `c-epoll`): before it blocks, the loop
// busy-polls with epoll_wait timeout 0 for up to US microseconds (the clock read every few polls), and
// blocks in epoll_wait only if nothing became ready meanwhile. A request/response peer that answers
// within the spin is caught awake: no sleep, no wake-up. corio's worker spins up to 50 us the same way
// before it sleeps (src/sched/worker.cpp), so at 1 client this is the peer's busy-polling configuration.

#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "c_server.h"

enum { MAX_EVENTS = 512, POLLS_PER_CLOCK = 4 };

struct conn {
  int fd;
  char* pending;  // the unsent rest of an echo, or NULL
  size_t pending_size;
  size_t pending_sent;
};

static int epoll_fd;
static char chunk[ECHO_CHUNK];

static void watch(struct conn* c, int op, unsigned events) {
  struct epoll_event event = {.events = events, .data.ptr = c};
  if (epoll_ctl(epoll_fd, op, c->fd, &event) != 0) echo_die("epoll_ctl: %s", strerror(errno));
}

static void drop(struct conn* c) {
  close(c->fd);  // also removes it from the epoll set
  free(c->pending);
  free(c);
}

static void accept_all(int listener) {
  for (;;) {
    int fd = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED) return;
      echo_die("accept4: %s", strerror(errno));
    }
    echo_nodelay(fd);
    struct conn* c = calloc(1, sizeof *c);
    if (!c) echo_die("out of memory");
    c->fd = fd;
    watch(c, EPOLL_CTL_ADD, EPOLLIN);
  }
}

// Sends what is left of the pending echo; back to reading once it is all out.
static void flush(struct conn* c) {
  ssize_t n = send(c->fd, c->pending + c->pending_sent, c->pending_size - c->pending_sent, MSG_NOSIGNAL);
  if (n < 0 && errno != EAGAIN) return drop(c);
  if (n > 0) c->pending_sent += (size_t)n;
  if (c->pending_sent < c->pending_size) return;
  free(c->pending);
  c->pending = NULL;
  watch(c, EPOLL_CTL_MOD, EPOLLIN);
}

static void echo(struct conn* c) {
  ssize_t got = recv(c->fd, chunk, sizeof chunk, 0);
  if (got < 0 && errno == EAGAIN) return;
  if (got <= 0) return drop(c);  // end of file, reset, or another error
  ssize_t sent = send(c->fd, chunk, (size_t)got, MSG_NOSIGNAL);
  if (sent < 0 && errno != EAGAIN) return drop(c);
  if (sent == got) return;
  size_t done = sent > 0 ? (size_t)sent : 0;
  c->pending_size = (size_t)got - done;
  c->pending_sent = 0;
  c->pending = malloc(c->pending_size);
  if (!c->pending) echo_die("out of memory");
  memcpy(c->pending, chunk + done, c->pending_size);
  watch(c, EPOLL_CTL_MOD, EPOLLOUT);
}

static int64_t monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// Waits for events: with a spin, polls (timeout 0) for up to `spin_ns` first, then blocks.
static int wait_events(struct epoll_event* events, int64_t spin_ns) {
  if (spin_ns > 0) {
    int64_t give_up = monotonic_ns() + spin_ns;
    for (unsigned polls = 1;; ++polls) {
      int ready = epoll_wait(epoll_fd, events, MAX_EVENTS, 0);
      if (ready != 0) return ready;  // events, or an error for the caller
      if (polls % POLLS_PER_CLOCK == 0 && monotonic_ns() >= give_up) break;
    }
  }
  return epoll_wait(epoll_fd, events, MAX_EVENTS, -1);
}

// `--spin-us US` after `--port P` (the shared parser takes `--port P` alone): the spin in nanoseconds.
static int64_t parse_spin(int* argc, char** argv) {
  if (*argc == 3) return 0;
  if (*argc != 5 || strcmp(argv[3], "--spin-us") != 0) echo_die("usage: %s --port P [--spin-us US]", argv[0]);
  char* end = NULL;
  long us = strtol(argv[4], &end, 10);
  if (end == argv[4] || *end != '\0' || us < 0 || us > 1000000) echo_die("bad --spin-us '%s'", argv[4]);
  *argc = 3;
  return (int64_t)us * 1000;
}

int main(int argc, char** argv) {
  int64_t spin_ns = parse_spin(&argc, argv);
  int listener = echo_listen(echo_parse_port(argc, argv), 1);
  epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd < 0) echo_die("epoll_create1: %s", strerror(errno));
  struct epoll_event event = {.events = EPOLLIN, .data.ptr = NULL};  // NULL marks the listener
  if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, listener, &event) != 0) echo_die("epoll_ctl: %s", strerror(errno));

  struct epoll_event events[MAX_EVENTS];
  for (;;) {
    int ready = wait_events(events, spin_ns);
    if (ready < 0 && errno != EINTR) echo_die("epoll_wait: %s", strerror(errno));
    for (int i = 0; i < ready; ++i) {
      struct conn* c = events[i].data.ptr;
      if (!c) accept_all(listener);
      else if (c->pending) flush(c);
      else echo(c);
    }
  }
}
