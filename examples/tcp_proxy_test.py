"""Runs examples/tcp_proxy (two workers) in front of an upstream server of this test's own, and checks what
its header promises: both directions relayed byte for byte, half-closes passed through, a reset on either
side ending both, a refused or silent upstream reported, no socket kept once connections end, SIGTERM
exits 0, bad flags exit 2.

    python3 tcp_proxy_test.py PATH_TO_TCP_PROXY BACKEND [PATH_TO_ECHO_SERVER PATH_TO_ECHO_CLIENT]

With the echo examples' paths it also puts the proxy between echo_client and echo_server: 200 connections
whose every echo is checked, corio on all three sides.

The upstream serves a mode named by the first line a connection sends: `echo` (everything back, then close
at end of input), `count` (read to end of input, answer "N bytes\\n", close), `reset` (close at once with a
reset), `hold` (read until the connection ends, and note that it did). Loopback only, bounded waits.
"""

import os
import random
import socket
import socketserver
import struct
import subprocess
import sys
import threading
import time

from example_test_kit import bad_flags, check, failures, finish, start, stop

PROXY = sys.argv[1]
BACKEND = sys.argv[2]
WAIT = 10  # seconds: the longest any step may take before it counts as a hang

held_ended = threading.Event()  # a `hold` connection saw its end


upstream_errors = []  # what went wrong on the upstream's side of connections that should have gone well


class Upstream(socketserver.StreamRequestHandler):
    def handle(self):
        try:
            self.serve()
        except OSError as error:
            upstream_errors.append(f"{self.mode!r}: {error!r}")

    def serve(self):  # reads through rfile only: its buffer holds what came after the first line
        self.mode = mode = self.rfile.readline().strip()
        if mode == b"echo":
            while chunk := self.rfile.read1(65536):
                self.request.sendall(chunk)
        elif mode == b"count":
            total = 0
            while chunk := self.rfile.read1(65536):
                total += len(chunk)
            self.request.sendall(f"{total} bytes\n".encode())
        elif mode == b"reset":  # closed here, so socketserver's shutdown(SHUT_WR) sends no FIN before the reset
            self.request.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.request.close()
        elif mode == b"hold":
            try:
                while self.rfile.read1(65536):
                    pass
            except ConnectionResetError:
                pass  # the test's client resets, and the proxy's close may pass that on
            held_ended.set()


class UpstreamServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    # Room for every connection the test opens at once. With socketserver's default of 5, a burst of the
    # proxy's connects overflowed the queue, and the kernel reset some of them before the upstream ever
    # accepted them (seen under TSan, about one run in 30).
    request_queue_size = 128


def connect(port, mode):
    client = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
    client.sendall(mode + b"\n")
    return client


def read_to_end(client):
    got = bytearray()
    while chunk := client.recv(65536):
        got += chunk
    return bytes(got)


def echo_through(port, payload, results, index):
    """Sends `payload` in random pieces while a second thread reads the echo; then half-closes."""
    try:
        with connect(port, b"echo") as client:
            echoed = []
            reader = threading.Thread(target=lambda: echoed.append(read_to_end(client)))
            reader.start()
            at = 0
            while at < len(payload):
                step = random.randint(1, 20000)
                client.sendall(payload[at:at + step])
                at += step
            client.shutdown(socket.SHUT_WR)
            reader.join(WAIT)
            results[index] = echoed[0] if echoed else None
    except OSError as error:
        results[index] = error


def ends_within(client, seconds):
    """Whether the connection ends (end of input or a reset) within `seconds`."""
    client.settimeout(seconds)
    try:
        while client.recv(65536):
            pass
        return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def socket_inodes(pid):
    """The sockets the process holds (its reactors' descriptors, made as workers first do I/O, aside)."""
    inodes = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:  # closed since the listing
            continue
        if target.startswith("socket:"):
            inodes.append(target[len("socket:["):-1])
    return inodes


def sockets(pid):
    return len(socket_inodes(pid))


def described(inodes):
    """What `ss` says of these sockets: their states and addresses."""
    table = subprocess.run(["ss", "-tane"], capture_output=True, text=True).stdout.splitlines()
    return [" ".join(line.split()[:5]) for line in table if any(f"ino:{inode} " in line for inode in inodes)]


upstream = UpstreamServer(("127.0.0.1", 0), Upstream)
threading.Thread(target=upstream.serve_forever, daemon=True).start()
upstream_port = upstream.server_address[1]

proxy, port = start(PROXY, "--upstream", f"localhost:{upstream_port}", "--threads", "2", "--backend", BACKEND)
check(port is not None, f"{BACKEND}: tcp_proxy started")
if port is None:
    stop(proxy)
    finish()
time.sleep(0.2)
idle_sockets = sockets(proxy.pid)  # its listeners

# 16 connections at once, each 300 KB both ways in random pieces; each echo ends with the half-close.
payloads = [random.randbytes(300_000) for _ in range(16)]
results = [None] * len(payloads)
threads = [threading.Thread(target=echo_through, args=(port, payload, results, i)) for i, payload in enumerate(payloads)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join(2 * WAIT)
matched = sum(result == payload for result, payload in zip(results, payloads))
check(matched == len(payloads), f"{BACKEND}: 16 connections x 300 KB relayed both ways, byte for byte, each ended "
      f"by a half-close passed through ({matched} of {len(payloads)} matched)")

# A half-close from the client: the upstream sees the end of input and still answers through the proxy.
with connect(port, b"count") as client:
    client.sendall(bytes(1_000_000))
    client.shutdown(socket.SHUT_WR)
    reply = read_to_end(client)
check(reply == b"1000000 bytes\n", f"{BACKEND}: the client's half-close reaches the upstream, whose answer comes "
      f"back (got {reply[:40]!r})")

# A client that resets: the proxy's connection to the upstream ends too.
client = connect(port, b"hold")
client.sendall(b"some data")
time.sleep(0.2)
client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
client.close()
check(held_ended.wait(WAIT), f"{BACKEND}: a client's reset ends the proxy's upstream connection")

# An upstream that resets: the client's connection ends.
with connect(port, b"reset") as client:
    check(ends_within(client, WAIT), f"{BACKEND}: an upstream's reset ends the client's connection")

# Every connection above has ended: the proxy holds no socket for any of them (within WAIT: a relay may end a
# moment after its client saw the end of its input).
deadline = time.monotonic() + WAIT
while (left := sockets(proxy.pid)) > idle_sockets and time.monotonic() < deadline:
    time.sleep(0.05)
check(left <= idle_sockets, f"{BACKEND}: no socket kept once the connections ended ({left}, idle {idle_sockets})")
if left > idle_sockets:
    print(f"      the proxy's sockets: {described(socket_inodes(proxy.pid))}")

# A connection open at SIGTERM does not keep the proxy from exiting 0.
client = connect(port, b"hold")
status, err = stop(proxy)
check(status == 0, f"{BACKEND}: SIGTERM with a connection open: exit status 0 (got {status}; {err.strip()[:200]!r})")
check(not upstream_errors, f"{BACKEND}: the upstream saw no error on the connections that went well: {upstream_errors}")
if failures:
    print(f"      the proxy's stderr: {err.strip()!r}")
client.close()

# An upstream that refuses: the client's connection is closed and the proxy says why.
closed = socket.socket()
closed.bind(("127.0.0.1", 0))
closed_port = closed.getsockname()[1]
closed.close()
proxy, port = start(PROXY, "--upstream", f"127.0.0.1:{closed_port}", "--backend", BACKEND)
with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as client:
    check(ends_within(client, WAIT), f"{BACKEND}: a refused upstream connection closes the client's")
status, err = stop(proxy)
check(status == 0 and "refused" in err, f"{BACKEND}: ... and the proxy reports it (exit {status}, {err.strip()!r})")

# An upstream that never answers the handshake (its accept queue full): --connect-timeout ends it.
silent = socket.socket()
silent.bind(("127.0.0.1", 0))
silent.listen(0)
fillers = []
for _ in range(4):  # a listen(0) queue holds one; the connects beyond it wait for a SYN-ACK that never comes
    filler = socket.socket()
    filler.setblocking(False)
    filler.connect_ex(silent.getsockname())
    fillers.append(filler)
proxy, port = start(PROXY, "--upstream", f"127.0.0.1:{silent.getsockname()[1]}", "--connect-timeout", "0.5",
                    "--backend", BACKEND)
began = time.monotonic()
with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as client:
    ended = ends_within(client, WAIT)
took = time.monotonic() - began
status, err = stop(proxy)
check(ended and took < 5 and "within 500 ms" in err and status == 0,
      f"{BACKEND}: a silent upstream: --connect-timeout 0.5 closes the client's connection and says so "
      f"(after {took:.2f} s, exit {status}; {err.strip()!r})")
for filler in fillers:
    filler.close()
silent.close()

if len(sys.argv) > 4:
    echo_server, echo_port = start(sys.argv[3], "--threads", "2", "--backend", BACKEND)
    proxy, port = start(PROXY, "--upstream", f"127.0.0.1:{echo_port}", "--threads", "2", "--backend", BACKEND)
    done = subprocess.run([sys.argv[4], "--port", str(port), "--connections", "200", "--messages", "100", "--bytes",
                           "1000", "--threads", "2", "--backend", BACKEND, "--timeout", str(WAIT)],
                          capture_output=True, text=True, timeout=6 * WAIT)
    check(done.returncode == 0 and "200 connection(s) x 100 message(s) of 1000 bytes echoed" in done.stdout,
          f"{BACKEND}: echo_client -> tcp_proxy -> echo_server: 200 connections x 100 echoes checked "
          f"(exit {done.returncode}; {done.stdout.strip()!r} {done.stderr.strip()[-300:]!r})")
    for process in (proxy, echo_server):
        status, err = stop(process)
        check(status == 0, f"{BACKEND}: {os.path.basename(process.args[0])}: SIGTERM: exit status 0 (got {status})")

bad_flags(PROXY, [(["--port", "1"], "--upstream"), (["--upstream", "nocolon"], "--upstream"),
                  (["--upstream", "host:0"], "--upstream"), (["--upstream", "host:70000"], "--upstream"),
                  (["--upstream", "[::1:80"], "--upstream"), (["--upstream", ":80"], "--upstream"),
                  (["--connect-timeout", "0"], "--connect-timeout"), (["--threads", "0"], "--threads"),
                  (["--backend", "x"], "backend")])
upstream.shutdown()
finish()
