// echo_load: the load client of the lab's `echo` experiment (bench/scenarios.md). It does not use
// corio, so a corio bug cannot flatter corio.
//
// Request semantics are rust_echo_bench's: each connection writes L bytes (the last one '\n'), then
// reads once; a read that returns anything but exactly L bytes, end of file, or an error counts as one
// error and ends that connection (so a server that splits or merges echoes shows up as errors). The
// client also compares the bytes it got with the bytes it sent (rust_echo_bench does not look; no
// correct server can tell the difference), and stamps each request with its sequence number so a stale
// buffer echoed back is caught.
//
// Unlike rust_echo_bench (a thread per connection) every connection is driven from one thread, one
// epoll loop, pinned to one core (--cpu): a thread per connection on one core would make the client
// the bottleneck. All connections are made before the clock starts; the window is D seconds.
//
// Beyond rust_echo_bench, a stalled connection is an error too: at the end of the window, every open
// connection that completed no request inside it, or whose current request has been outstanding for
// more than STALL_S, counts as one error (a server that stops answering a connection cannot hide
// behind the others' throughput).
//
//   echo_load --address 127.0.0.1:PORT --clients N --bytes L --seconds D [--cpu K] [--server-pid PID]
//
// Prints one line of key=value pairs to stdout (requests, seconds, requests_per_sec, errors, stalled
// (how many of the errors are stalled connections), and with --server-pid the server's user and system
// CPU seconds spent inside the window, read from /proc/PID/stat at its start and end). Exits 1 on a
// usage or set-up error, or when errors > 0.

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { MAX_EVENTS = 512, SHOWN_ERRORS = 5 };
static const double STALL_S = 1.0;  // a request outstanding longer than this at the window's end is an error

struct options {
  struct sockaddr_in address;
  long clients;
  long bytes;
  double seconds;
  long cpu;         // -1: not pinned
  long server_pid;  // 0: no server CPU accounting
};

struct conn {
  int fd;
  long id;
  uint64_t sequence;  // requests sent on this connection
  long written;       // bytes of the current request written so far
  long completed;     // good echoes received inside the window
  double sent_at;     // when the current request began (the previous echo's epoll round, or the start)
  int wants_write;    // epoll watches EPOLLOUT (a write did not complete at once)
};

struct cpu_times {
  double user_s;
  double sys_s;
};

static void die(const char* format, ...) {
  va_list args;
  va_start(args, format);
  fputs("echo_load: ", stderr);
  vfprintf(stderr, format, args);
  fputc('\n', stderr);
  va_end(args);
  exit(1);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static long number(const char* name, const char* text, long low) {
  char* end = NULL;
  long value = strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < low) die("--%s wants an integer >= %ld, got '%s'", name, low, text);
  return value;
}

static void parse_address(const char* text, struct sockaddr_in* out) {
  char host[64];
  const char* colon = strrchr(text, ':');
  if (!colon || (size_t)(colon - text) >= sizeof host) die("--address wants IPv4:PORT, got '%s'", text);
  memcpy(host, text, (size_t)(colon - text));
  host[colon - text] = '\0';
  memset(out, 0, sizeof *out);
  out->sin_family = AF_INET;
  out->sin_port = htons((uint16_t)number("address port", colon + 1, 1));
  if (inet_pton(AF_INET, host, &out->sin_addr) != 1) die("--address: '%s' is not an IPv4 address", host);
}

static struct options parse(int argc, char** argv) {
  struct options o = {.clients = 0, .bytes = 0, .seconds = 0, .cpu = -1, .server_pid = 0};
  int have_address = 0;
  for (int i = 1; i < argc; i += 2) {
    const char* name = argv[i];
    if (i + 1 >= argc) die("missing value for %s", name);
    const char* value = argv[i + 1];
    if (!strcmp(name, "--address")) parse_address(value, &o.address), have_address = 1;
    else if (!strcmp(name, "--clients")) o.clients = number("clients", value, 1);
    else if (!strcmp(name, "--bytes")) o.bytes = number("bytes", value, 1);
    else if (!strcmp(name, "--seconds")) o.seconds = strtod(value, NULL);
    else if (!strcmp(name, "--cpu")) o.cpu = number("cpu", value, 0);
    else if (!strcmp(name, "--server-pid")) o.server_pid = number("server-pid", value, 1);
    else die("unknown option %s", name);
  }
  if (!have_address || o.clients == 0 || o.bytes == 0 || !(o.seconds > 0))
    die("usage: echo_load --address IPv4:PORT --clients N --bytes L --seconds D [--cpu K] [--server-pid PID]");
  return o;
}

// User and system CPU of every thread of `pid` so far (fields 14 and 15 of /proc/PID/stat).
static struct cpu_times process_cpu(long pid) {
  char path[64], text[1024];
  snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  FILE* file = fopen(path, "r");
  if (!file) die("cannot open %s: %s", path, strerror(errno));
  size_t length = fread(text, 1, sizeof text - 1, file);
  fclose(file);
  text[length] = '\0';
  const char* fields = strrchr(text, ')');  // the command name may hold spaces and parentheses
  unsigned long long user = 0, sys = 0;
  if (!fields || sscanf(fields + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &user, &sys) != 2)
    die("cannot parse %s", path);
  double tick = (double)sysconf(_SC_CLK_TCK);
  return (struct cpu_times){(double)user / tick, (double)sys / tick};
}

static struct cpu_times own_cpu(void) {
  struct rusage self;
  getrusage(RUSAGE_SELF, &self);
  return (struct cpu_times){(double)self.ru_utime.tv_sec + (double)self.ru_utime.tv_usec * 1e-6,
                            (double)self.ru_stime.tv_sec + (double)self.ru_stime.tv_usec * 1e-6};
}

static void pin(long cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET((int)cpu, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0) die("cannot pin to CPU %ld: %s", cpu, strerror(errno));
}

static void raise_fd_limit(long needed) {
  struct rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || (rlim_t)needed <= limit.rlim_cur) return;
  limit.rlim_cur = limit.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0 || (rlim_t)needed > limit.rlim_cur)
    die("%ld connections need more descriptors than RLIMIT_NOFILE allows", needed);
}

static int connect_one(const struct options* o, int epoll, struct conn* c) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) die("socket: %s", strerror(errno));
  if (connect(fd, (const struct sockaddr*)&o->address, sizeof o->address) != 0)
    die("connect (client %ld): %s", c->id, strerror(errno));
  int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) die("TCP_NODELAY: %s", strerror(errno));
  if (fcntl(fd, F_SETFL, O_NONBLOCK) != 0) die("O_NONBLOCK: %s", strerror(errno));
  struct epoll_event event = {.events = EPOLLIN, .data.ptr = c};
  if (epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event) != 0) die("epoll_ctl: %s", strerror(errno));
  return fd;
}

struct load {
  const struct options* o;
  int epoll;
  unsigned char* out;  // the request being sent; its first bytes are restamped for every request
  unsigned char* in;   // room for one byte more than a request, so an over-long echo is seen at once
  double now;  // the clock after the latest epoll_wait (read once per round, not per request)
  long requests;
  long errors;
  long stalled;
  long open;
};

// Ends connection `c` with an error (rust_echo_bench's rule), reporting the first few.
static void fail_conn(struct load* l, struct conn* c, const char* why, long got) {
  if (l->errors < SHOWN_ERRORS)
    fprintf(stderr, "echo_load: connection %ld, request %llu: %s (%ld)\n", c->id,
            (unsigned long long)c->sequence, why, got);
  ++l->errors;
  --l->open;
  close(c->fd);
  c->fd = -1;
}

static void stamp(struct load* l, uint64_t sequence) {
  long room = l->o->bytes - 1;  // the last byte stays '\n'
  for (long i = 0; i < room && i < 8; ++i) l->out[i] = (unsigned char)('0' + (sequence >> (4 * i) & 0xf));
}

// Writes what is left of the current request; watches EPOLLOUT only while a write is incomplete.
static void write_request(struct load* l, struct conn* c) {
  stamp(l, c->sequence);
  ssize_t n = send(c->fd, l->out + c->written, (size_t)(l->o->bytes - c->written), MSG_NOSIGNAL);
  if (n < 0 && errno != EAGAIN) return fail_conn(l, c, strerror(errno), -1);
  if (n > 0) c->written += n;
  int incomplete = c->written < l->o->bytes;
  if (incomplete != c->wants_write) {
    struct epoll_event event = {.events = incomplete ? EPOLLOUT : EPOLLIN, .data.ptr = c};
    if (epoll_ctl(l->epoll, EPOLL_CTL_MOD, c->fd, &event) != 0) die("epoll_ctl: %s", strerror(errno));
    c->wants_write = incomplete;
  }
}

// One read for the current request: exactly L bytes equal to what was sent, or the connection ends.
static void read_response(struct load* l, struct conn* c) {
  ssize_t n = recv(c->fd, l->in, (size_t)l->o->bytes + 1, 0);
  if (n < 0 && errno == EAGAIN) return;  // spurious readiness: wait again
  if (n < 0) return fail_conn(l, c, strerror(errno), -1);
  if (n == 0) return fail_conn(l, c, "end of file instead of the echo", 0);
  if (n != l->o->bytes) return fail_conn(l, c, "read returned a byte count other than the request's", n);
  stamp(l, c->sequence);
  if (memcmp(l->in, l->out, (size_t)n) != 0) return fail_conn(l, c, "echo differs from the request", n);
  ++l->requests;
  ++c->completed;
  ++c->sequence;
  c->written = 0;
  c->sent_at = l->now;
  write_request(l, c);
}

// At the end of the window (`end`): every open connection that completed no request inside it, or whose
// current request has been outstanding for more than STALL_S, is an error.
static void count_stalls(struct load* l, struct conn* conns, double end) {
  for (long i = 0; i < l->o->clients; ++i) {
    struct conn* c = &conns[i];
    if (c->fd < 0) continue;  // already counted as an error
    double waited = end - c->sent_at;
    if (c->completed > 0 && waited <= STALL_S) continue;
    if (l->errors < SHOWN_ERRORS)
      fprintf(stderr, "echo_load: connection %ld, request %llu: stalled: %ld requests completed in the window, "
              "the current one outstanding for %.3f s at its end\n", c->id, (unsigned long long)c->sequence,
              c->completed, waited);
    ++l->errors;
    ++l->stalled;
  }
  if (l->stalled > 0)
    fprintf(stderr, "echo_load: %ld of %ld connections stalled (no request completed in the window, or one "
            "outstanding for more than %.1f s at its end)\n", l->stalled, l->o->clients, STALL_S);
}

int main(int argc, char** argv) {
  struct options o = parse(argc, argv);
  if (o.cpu >= 0) pin(o.cpu);
  raise_fd_limit(o.clients + 16);

  struct load l = {.o = &o, .open = o.clients};
  l.epoll = epoll_create1(EPOLL_CLOEXEC);
  l.out = calloc((size_t)o.bytes, 1);
  l.in = calloc((size_t)o.bytes + 1, 1);
  struct conn* conns = calloc((size_t)o.clients, sizeof *conns);
  if (l.epoll < 0 || !l.out || !l.in || !conns) die("out of memory or descriptors");
  l.out[o.bytes - 1] = '\n';
  for (long i = 0; i < o.clients; ++i) {
    conns[i].id = i;
    conns[i].fd = connect_one(&o, l.epoll, &conns[i]);
  }

  // The window: every connection sends its first request, then each echo received sends the next.
  struct cpu_times server_before = {0, 0}, server_after = {0, 0}, client_before = own_cpu();
  if (o.server_pid) server_before = process_cpu(o.server_pid);
  double start = now_s(), deadline = start + o.seconds, now = start;
  l.now = start;
  for (long i = 0; i < o.clients; ++i) {
    conns[i].sent_at = start;
    write_request(&l, &conns[i]);
  }
  struct epoll_event events[MAX_EVENTS];
  while (l.open > 0) {
    int timeout_ms = (int)((deadline - now) * 1e3) + 1;
    int ready = epoll_wait(l.epoll, events, MAX_EVENTS, timeout_ms);
    if (ready < 0 && errno != EINTR) die("epoll_wait: %s", strerror(errno));
    now = l.now = now_s();
    if (now >= deadline) break;  // what arrived after the deadline is not counted
    for (int i = 0; i < ready; ++i) {
      struct conn* c = events[i].data.ptr;
      if (c->fd < 0) continue;
      if (c->wants_write) write_request(&l, c);
      else read_response(&l, c);
    }
  }
  if (o.server_pid) server_after = process_cpu(o.server_pid);
  struct cpu_times client_after = own_cpu();
  double end = now < deadline ? now : deadline;  // earlier only if every connection failed
  double seconds = end - start;
  count_stalls(&l, conns, end);

  for (long i = 0; i < o.clients; ++i)
    if (conns[i].fd >= 0) close(conns[i].fd);
  printf("requests=%ld seconds=%.6f requests_per_sec=%.1f errors=%ld stalled=%ld server_user_s=%.2f "
         "server_sys_s=%.2f client_user_s=%.3f client_sys_s=%.3f\n",
         l.requests, seconds, (double)l.requests / seconds, l.errors, l.stalled,
         server_after.user_s - server_before.user_s,
         server_after.sys_s - server_before.sys_s, client_after.user_s - client_before.user_s,
         client_after.sys_s - client_before.sys_s);
  return l.errors == 0 ? 0 : 1;
}
