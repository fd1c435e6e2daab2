"""Runs examples/chat_server (two workers) with several clients and checks what its header promises: every
line reaches every other client whole and in order, prefixed with its sender, and not its sender; joins
and departures are announced; a line split across sends arrives whole, a last line without its newline is
delivered when its sender closes, an overlong line ends its sender's connection; a client that reads slowly
is told how many messages it missed and reads on, and one that never reads holds up nobody; 50 clients
talking at once all hear each other; SIGTERM exits 0; bad flags exit 2.

    python3 chat_server_test.py PATH_TO_CHAT_SERVER BACKEND

Loopback only, bounded waits.
"""

import socket
import sys
import threading
import time

from example_test_kit import bad_flags, check, finish, start, stop

SERVER = sys.argv[1]
BACKEND = sys.argv[2]
WAIT = 10  # seconds: the longest any step may take before it counts as a hang


class Client:
    def __init__(self, port):
        self.socket = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
        host, client_port = self.socket.getsockname()
        self.name = f"{host}:{client_port}"
        self.pending = b""
        self.expect(f"*** {self.name} joined")  # its own join comes once it has subscribed

    def say(self, text):
        self.socket.sendall(text.encode())

    def line(self):
        """The next line, without its newline; None if the connection ended first."""
        while b"\n" not in self.pending:
            chunk = self.socket.recv(65536)
            if not chunk:
                return None
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        return line.decode()

    def expect(self, wanted):
        """Reads lines until `wanted`, skipping announcements of others joining; returns what else came first."""
        other = []
        while (got := self.line()) != wanted:
            if got is None:
                raise AssertionError(f"{self.name}: the connection ended while waiting for {wanted!r}")
            if not got.endswith(" joined"):
                other.append(got)
        return other

    def close(self):
        self.socket.close()


def quiet(client, seconds):
    """Whether nothing arrives for `client` within `seconds`."""
    client.socket.settimeout(seconds)
    try:
        return b"\n" not in client.pending and not client.socket.recv(65536, socket.MSG_PEEK)
    except socket.timeout:
        return True
    finally:
        client.socket.settimeout(WAIT)


server, port = start(SERVER, "--threads", "2", "--backend", BACKEND, "--history", "4096")
check(port is not None, f"{BACKEND}: chat_server started")
if port is None:
    stop(server)
    finish()

a, b, c = Client(port), Client(port), Client(port)
a.say("hello from a\n")
check(b.expect(f"{a.name}: hello from a") == [] and c.expect(f"{a.name}: hello from a") == [],
      f"{BACKEND}: a line reaches the other clients, prefixed with its sender")
b.say("part")
time.sleep(0.1)
b.say("ial line\n")
check(a.expect(f"{b.name}: partial line") == [], f"{BACKEND}: a line sent in two pieces arrives whole")
c.expect(f"{b.name}: partial line")
check(quiet(a, 0.3) and quiet(b, 0.3), f"{BACKEND}: a sender does not get its own lines")

# 2,000 lines in one burst of sends: all reach both others, in order (the room keeps 4,096).
burst = "".join(f"line {i}\n" for i in range(2000))
a.say(burst)
for reader in (b, c):
    got = [reader.line() for _ in range(2000)]
    check(got == [f"{a.name}: line {i}" for i in range(2000)], f"{BACKEND}: 2,000 lines arrive whole and in order")

# A client that never reads holds up nobody: 4 MB of lines, and the others still get every one.
stuck = Client(port)
for reader in (a, b, c):
    reader.expect(f"*** {stuck.name} joined")
line = "x" * 1000
for round_ in range(4):
    c.say("".join(f"{round_} {i} {line}\n" for i in range(1000)))
    for reader in (a, b):
        got = [reader.line() for _ in range(1000)]
        check(got == [f"{c.name}: {round_} {i} {line}" for i in range(1000)],
              f"{BACKEND}: round {round_}: 1,000 lines of 1 KB arrive while one client reads nothing")

# The last line without its newline is delivered when its sender closes; its departure is announced.
b.say("bye")
b.socket.shutdown(socket.SHUT_WR)
check(a.expect(f"{b.name}: bye") == [] and a.expect(f"*** {b.name} left") == [],
      f"{BACKEND}: a last line without a newline arrives when its sender closes, then its departure")
b.close()

# An overlong line ends its sender's connection, with a notice; the others see it leave.
long_talker = Client(port)
long_talker.say("y" * 5000)
check(long_talker.line() == "*** line too long" and long_talker.line() is None,
      f"{BACKEND}: a line over 4096 bytes ends its sender's connection, with a notice")
others = a.expect(f"*** {long_talker.name} left")
check(others == [], f"{BACKEND}: ... and the others see it leave (before it: {[line[:60] for line in others[:3]]})")
long_talker.close()
stuck.close()
a.close()
c.close()
status, err = stop(server)
check(status == 0, f"{BACKEND}: SIGTERM: exit status 0 (got {status}; {err.strip()[:200]!r})")

# A room of four messages: a reader that falls behind is told how many it missed, and what it reads plus
# what it missed is everything, in order.
server, port = start(SERVER, "--threads", "2", "--backend", BACKEND, "--history", "4")
talker, slow = Client(port), Client(port)
talker.expect(f"*** {slow.name} joined")
talker.say("".join(f"burst {i}\n" for i in range(500)))
read, missed, expected = 0, 0, 0  # expected: the number the next line must carry
in_order = True
while expected < 500:
    got = slow.line()
    if got is None:
        break
    if got.startswith("*** ") and got.endswith(" message(s) missed"):
        missed += int(got.split()[1])
        expected += int(got.split()[1])  # it goes on from the oldest message kept
        continue
    number = int(got.rsplit(" ", 1)[1])
    in_order = in_order and number == expected
    expected = number + 1
    read += 1
check(expected == 500 and read + missed == 500 and in_order,
      f"{BACKEND}: a reader behind a room of 4: read {read} + missed {missed} = 500, each in its place")
talker.close()
slow.close()
status, _ = stop(server)
check(status == 0, f"{BACKEND}: SIGTERM: exit status 0 (got {status})")

# 50 clients talk at once, 20 lines each: every client gets the other 49's 980 lines, each sender's in order.
server, port = start(SERVER, "--threads", "2", "--backend", BACKEND, "--history", "8192")
crowd = [Client(port) for _ in range(50)]
heard = [None] * len(crowd)


def talk_and_listen(index):
    me = crowd[index]
    me.say("".join(f"crowd {index} {k}\n" for k in range(20)))
    by_sender = {}
    try:
        while sum(len(lines) for lines in by_sender.values()) < 49 * 20:
            line = me.line()
            if line is None:
                break
            if ": crowd " in line:
                sender, number = map(int, line.split(": crowd ")[1].split())
                by_sender.setdefault(sender, []).append(number)
    except OSError:
        pass
    heard[index] = by_sender


talkers = [threading.Thread(target=talk_and_listen, args=(i,)) for i in range(len(crowd))]
for talker in talkers:
    talker.start()
for talker in talkers:
    talker.join(3 * WAIT)
whole = sum(by_sender is not None and sorted(by_sender) == [i for i in range(50) if i != index]
            and all(numbers == list(range(20)) for numbers in by_sender.values())
            for index, by_sender in enumerate(heard))
check(whole == 50, f"{BACKEND}: 50 clients x 20 lines at once: each heard the other 49 whole and in order "
      f"({whole} of 50 did)")
for client in crowd:
    client.close()
status, _ = stop(server)
check(status == 0, f"{BACKEND}: SIGTERM: exit status 0 (got {status})")

bad_flags(SERVER, [(["--history", "0"], "--history"), (["--history", "x"], "--history"), (["--threads", "0"], "--threads"),
                   (["--port", "70000"], "--port"), (["--backend", "x"], "backend")])
finish()
