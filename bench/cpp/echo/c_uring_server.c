// c-uring: the plain liburing echo server of the lab's `echo` experiment (bench/scenarios.md).
//
//   c_uring_server --port P
//
// What it shows: the io_uring server a C programmer writes from liburing's examples, set up the way
// the kernel's documentation recommends for one thread, and nothing more:
// - one ring, IORING_SETUP_SINGLE_ISSUER + IORING_SETUP_DEFER_TASKRUN (completions are run when the
//   thread asks for them, in one batch, instead of interrupting it), its fd registered;
// - one io_uring_submit_and_wait per loop turn, then every completion reaped in one pass;
// - a multishot accept on the listener;
// - per connection, one operation at a time: a recv into the connection's own buffer, then a send of
//   exactly what it got (again for the rest if the send was short), then the next recv. So at most
//   one recv and one send are ever in flight for a connection, and no buffer is shared.
// It does not use provided-buffer rings, multishot recv or linked operations: those are what corio's
// reactor is expected to add on top of this baseline.

#define _GNU_SOURCE
#include <errno.h>
#include <liburing.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "c_server.h"

enum { RING_ENTRIES = 4096 };

struct conn {
  int fd;
  int sending;      // the operation in flight: 1 a send, 0 a recv
  unsigned size;    // bytes of the echo being sent
  unsigned sent;    // of which the kernel has taken this many
  char buf[ECHO_CHUNK];
};

static struct io_uring ring;
static int listener;

// The next free submission entry; submits what is queued first if the ring is full.
static struct io_uring_sqe* next_sqe(void) {
  struct io_uring_sqe* sqe = io_uring_get_sqe(&ring);
  if (!sqe) {
    io_uring_submit(&ring);
    sqe = io_uring_get_sqe(&ring);
    if (!sqe) echo_die("submission queue full after a submit");
  }
  return sqe;
}

static void arm_accept(void) {
  struct io_uring_sqe* sqe = next_sqe();
  io_uring_prep_multishot_accept(sqe, listener, NULL, NULL, SOCK_CLOEXEC);
  io_uring_sqe_set_data(sqe, NULL);  // NULL marks the accept
}

static void queue_recv(struct conn* c) {
  struct io_uring_sqe* sqe = next_sqe();
  io_uring_prep_recv(sqe, c->fd, c->buf, sizeof c->buf, 0);
  io_uring_sqe_set_data(sqe, c);
  c->sending = 0;
}

static void queue_send(struct conn* c) {
  struct io_uring_sqe* sqe = next_sqe();
  io_uring_prep_send(sqe, c->fd, c->buf + c->sent, c->size - c->sent, MSG_NOSIGNAL);
  io_uring_sqe_set_data(sqe, c);
  c->sending = 1;
}

// Nothing of `c` is in flight when it completes with an error or end of file, so it can go at once.
static void drop(struct conn* c) {
  close(c->fd);
  free(c);
}

static void accepted(const struct io_uring_cqe* cqe) {
  if (!(cqe->flags & IORING_CQE_F_MORE)) arm_accept();  // the multishot accept ended: start another
  if (cqe->res < 0) {
    if (cqe->res == -EINTR || cqe->res == -ECONNABORTED) return;
    echo_die("accept: %s", strerror(-cqe->res));
  }
  echo_nodelay(cqe->res);
  struct conn* c = malloc(sizeof *c);
  if (!c) echo_die("out of memory");
  c->fd = cqe->res;
  queue_recv(c);
}

static void completed(struct conn* c, int res) {
  if (res <= 0) return drop(c);  // end of file, reset, or another error
  if (!c->sending) {
    c->size = (unsigned)res;
    c->sent = 0;
    return queue_send(c);
  }
  c->sent += (unsigned)res;
  if (c->sent < c->size) return queue_send(c);
  queue_recv(c);
}

int main(int argc, char** argv) {
  listener = echo_listen(echo_parse_port(argc, argv), 0);
  struct io_uring_params params = {.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN};
  int error = io_uring_queue_init_params(RING_ENTRIES, &ring, &params);
  if (error < 0) echo_die("io_uring setup with SINGLE_ISSUER + DEFER_TASKRUN (kernel 6.1+): %s", strerror(-error));
  io_uring_register_ring_fd(&ring);  // saves an fd lookup per enter; harmless if the kernel lacks it
  arm_accept();

  for (;;) {
    error = io_uring_submit_and_wait(&ring, 1);
    if (error < 0 && error != -EINTR) echo_die("io_uring_submit_and_wait: %s", strerror(-error));
    unsigned head, seen = 0;
    struct io_uring_cqe* cqe;
    io_uring_for_each_cqe(&ring, head, cqe) {
      ++seen;
      struct conn* c = io_uring_cqe_get_data(cqe);
      if (!c) accepted(cqe);
      else completed(c, cqe->res);
    }
    io_uring_cq_advance(&ring, seen);
  }
}
