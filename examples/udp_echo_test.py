"""Tests examples/udp_echo_server and examples/udp_ping against what their headers promise, on one backend.

usage: udp_echo_test.py UDP_ECHO_SERVER UDP_PING BACKEND

- udp_ping's flows against the server (two workers, eight receivers on one socket): every ping
  answered, nothing late or stray; the largest datagram too;
- raw clients sending datagrams of 0 to 2,000 bytes, several in flight from each socket: each comes
  back whole to the socket that sent it;
- a datagram longer than --max-bytes is not echoed but counted, and the server goes on;
- udp_ping against a peer that drops one ping, answers one after its timeout, and sends strays:
  the summary counts each exactly (a datagram from another address never reaches its connected
  socket), and the exit status says a ping was lost;
- udp_ping to a silent port: every ping lost, within its timeouts; to a closed one: every ping
  refused at once;
- SIGTERM with every receiver waiting: exit 0, and the count of echoes equals what was sent;
- bad flags exit 2 naming the flag.
"""

import os
import random
import re
import socket
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from example_test_kit import bad_flags, check, finish, start, stop  # noqa: E402

SERVER, PING, BACKEND = sys.argv[1], sys.argv[2], sys.argv[3]
SUMMARY = re.compile(r"udp_ping: (\d+) sent, (\d+) received, (\d+) lost \([\d.]+%\), (\d+) late, (\d+) stray, "
                     r"(\d+) refused; rtt (.*)")


def ping(port, *flags, timeout=60):
    """Runs udp_ping; returns (exit status, (sent, received, lost, late, stray, refused) or None, its output)."""
    done = subprocess.run([PING, "--port", str(port), "--backend", BACKEND, *flags], capture_output=True, text=True,
                          timeout=timeout)
    found = SUMMARY.search(done.stdout)
    counts = tuple(int(found.group(i)) for i in range(1, 7)) if found else None
    return done.returncode, counts, (done.stdout + done.stderr).strip()


def flows_are_answered(port):
    status, counts, said = ping(port, "--threads", "2", "--flows", "8", "--count", "200", "--interval", "0",
                                "--timeout", "5", "--size", "200")
    check(status == 0 and counts == (1600, 1600, 0, 0, 0, 0), f"8 flows x 200 pings: all answered (got {status}: {said})")
    status, counts, said = ping(port, "--count", "20", "--interval", "0", "--timeout", "5", "--size", "65507")
    check(status == 0 and counts == (20, 20, 0, 0, 0, 0), f"20 pings of 65,507 bytes: all answered (got {status}: {said})")
    return 1600 + 20


def raw_clients_get_their_own(port, clients=8, each=100, window=3, largest=2000):
    """Datagrams of random sizes (0 among them), `window` in flight per socket; replies may come back in another
    order (several receivers), so each must match one of its socket's outstanding datagrams. What is in flight at
    once (24 datagrams of at most 2,000 bytes) stays well within the server socket's default receive buffer
    (net.core.rmem_default, 208 KiB, which counts each datagram with its kernel overhead): beyond it the kernel drops
    datagrams (RcvbufErrors), which UDP allows and which a server slowed by a parallel test would see."""
    rng = random.Random(8)
    failures = []

    def client(number):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.settimeout(5)
            outstanding = []
            sizes = [0] + [rng.randrange(1, largest + 1) for _ in range(each - 1)]
            for i, size in enumerate(sizes):
                datagram = bytes((number * 31 + i * 7 + k) % 256 for k in range(size))
                sock.sendto(datagram, ("127.0.0.1", port))
                outstanding.append(datagram)
                while len(outstanding) >= window or (i == len(sizes) - 1 and outstanding):
                    try:
                        reply, sender = sock.recvfrom(65535)
                    except socket.timeout:
                        failures.append(f"client {number}: no reply within 5 s ({len(outstanding)} outstanding)")
                        return
                    if reply not in outstanding or sender[1] != port:
                        failures.append(f"client {number}: a reply of {len(reply)} bytes from {sender} that it did "
                                        "not send")
                        return
                    outstanding.remove(reply)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    check(not failures, f"{clients} raw clients x {each} datagrams of 0-{largest} bytes: each echoed whole to its "
          "sender"
          + (f" (got: {failures[:3]})" if failures else ""))
    return clients * each


def too_long_is_counted():
    server, port = start(SERVER, "--max-bytes", "1000", "--backend", BACKEND)
    if port is None:
        check(False, "the --max-bytes 1000 server started")
        stop(server)
        return
    answered = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(0.5)
        for size in (1001, 1000, 5000, 10):
            sock.sendto(b"x" * size, ("127.0.0.1", port))
            try:
                answered.append(len(sock.recvfrom(65535)[0]))
            except socket.timeout:
                pass
    status, err = stop(server)
    check(answered == [1000, 10], f"--max-bytes 1000: 1001 and 5000 bytes not echoed, 1000 and 10 echoed "
          f"(got echoes of {answered})")
    check(status == 0 and "2 datagram(s) echoed, 2 too long, 0 error(s)" in server.rest_of_stdout,
          f"--max-bytes 1000: stops with 2 echoed and 2 too long counted (got {status}: {err.strip()!r})")


class LossyPeer:
    """An echo that drops ping 1, answers ping 3 after `late_by` s, and before answering ping 4 sends the answer
    from another socket (which udp_ping's connected socket never sees) and a damaged copy from its own (a
    stray). The sequence number is the ping's bytes 12-16 (udp_ping's header: nonce, flow, sequence)."""

    def __init__(self, late_by):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.late_by = late_by
        self.running = True
        self.thread = threading.Thread(target=self.serve)
        self.thread.start()

    def serve(self):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as other:
            while self.running:
                try:
                    datagram, sender = self.sock.recvfrom(65535)
                except socket.timeout:
                    continue
                sequence = struct.unpack_from("<I", datagram, 12)[0]
                if sequence == 1:
                    continue
                if sequence == 3:
                    threading.Timer(self.late_by, self.sock.sendto, (datagram, sender)).start()
                    continue
                if sequence == 4:
                    other.sendto(datagram, sender)
                    self.sock.sendto(datagram[:-1] + bytes([datagram[-1] ^ 1]), sender)
                self.sock.sendto(datagram, sender)

    def close(self):
        self.running = False
        self.thread.join()
        self.sock.close()


def losses_are_counted():
    # Ping k goes at k s and is given up at + 0.2 s; ping 3's answer comes at + 0.6 s, in the pause before
    # ping 4, whose wait reads it first: late, and not taken for ping 4's answer (0.4 s of margin each way,
    # for a loaded machine).
    peer = LossyPeer(late_by=0.6)
    try:
        status, counts, said = ping(peer.port, "--count", "6", "--interval", "1", "--timeout", "0.2", "--size", "100")
    finally:
        peer.close()
    check(status == 1 and counts == (6, 4, 2, 1, 1, 0),
          f"a lossy peer: 6 sent, 4 received, 2 lost, 1 late, 1 stray (the other socket's copy dropped by the "
          f"kernel), exit status 1 (got {status}: {said})")


def nobody_answering():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never read: nothing answers, and nothing refuses
        began = time.monotonic()
        status, counts, said = ping(port, "--count", "3", "--interval", "0.1", "--timeout", "0.1")
        took = time.monotonic() - began
    check(status == 1 and counts == (3, 0, 3, 0, 0, 0) and "rtt -" in said and took < 5,
          f"a silent port: 3 pings lost to their timeouts, exit status 1, in under 5 s (got {status} after "
          f"{took:.1f} s: {said})")
    # Now closed: the kernel answers each ping with port unreachable, so each is refused without its timeout;
    # with eight flows on two workers, the refusals reach receives waiting in either worker's reactor.
    began = time.monotonic()
    status, counts, said = ping(port, "--count", "3", "--interval", "0", "--timeout", "30")
    took = time.monotonic() - began
    check(status == 1 and counts == (3, 0, 3, 0, 0, 3) and took < 10,
          f"a closed port: 3 pings refused at once, exit status 1 (got {status} after {took:.1f} s: {said})")
    status, counts, said = ping(port, "--count", "20", "--interval", "0.01", "--timeout", "30", "--flows", "8",
                                "--threads", "2")
    check(status == 1 and counts == (160, 0, 160, 0, 0, 160),
          f"a closed port, 8 flows on 2 workers: 160 pings refused (got {status}: {said})")


def main():
    bad_flags(SERVER, [(["--receivers", "0"], "--receivers"), (["--max-bytes", "65536"], "--max-bytes"),
                       (["--max-bytes", "0"], "--max-bytes"), (["--bogus", "1"], "--bogus")])
    bad_flags(PING, [(["--count", "1"], "--port")]
              + [(["--port", "9", flag, value], flag) for flag, value in [
                  ("--size", "15"), ("--interval", "-1"), ("--interval", "0.0004"), ("--timeout", "0"), ("--count", "0"),
                  ("--flows", "x")]])

    server, port = start(SERVER, "--threads", "2", "--receivers", "8", "--backend", BACKEND)
    check(port is not None, f"udp_echo_server --backend {BACKEND} started")
    if port is None:
        stop(server)
        finish()
    sent = flows_are_answered(port)
    sent += raw_clients_get_their_own(port)
    status, err = stop(server)
    said = server.rest_of_stdout
    check(f"I/O backend {BACKEND}" in err, f"the server ran on {BACKEND} (its stderr: {err.strip()!r})")
    check(status == 0 and f"{sent} datagram(s) echoed, 0 too long, 0 error(s)" in said,
          f"SIGTERM with receivers waiting: exit 0, {sent} echoes counted (got {status}: {said.strip()!r} "
          f"{err.strip()!r})")

    too_long_is_counted()
    losses_are_counted()
    nobody_answering()
    finish()


if __name__ == "__main__":
    main()
