"""Runs examples/echo_server where its header promises more than echo_server_test.sh's smoke run checks:
--read-timeout 0, a backend that cannot be set up, stdout's reader gone, running out of descriptors.

    python3 echo_server_edge_test.py PATH_TO_ECHO_SERVER [SANITIZERS]

Loopback only; every server this starts is stopped by its PID, and every wait is bounded. SANITIZERS is
the build's CORIO_SANITIZE value (see the out-of-descriptors part).
"""

import os
import socket
import subprocess
import sys
import time

from example_test_kit import check, finish, start as start_server, stop

SERVER = sys.argv[1]
SANITIZERS = sys.argv[2] if len(sys.argv) > 2 else ""


def start(*flags, **options):
    return start_server(SERVER, *flags, **options)


def echoes(port, message=b"hello\n"):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as client:
            client.sendall(message)
            got = b""
            while len(got) < len(message):
                chunk = client.recv(len(message) - len(got))
                if not chunk:
                    break
                got += chunk
            return got == message
    except OSError as error:
        print(f"      (connecting to port {port}: {error})")
        return False


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


# --read-timeout 0 means no timeout.
server, port = start("--read-timeout", "0")
check(port is not None and echoes(port), "--read-timeout 0 (no timeout) serves")
status, _ = stop(server)
check(status == 0, f"SIGTERM: exit status 0 (got {status})")

# A backend that cannot be set up stops the server with status 1 and says why, at once.
began = time.monotonic()
server, port = start(env={"CORIO_BACKEND": "bogus"})
try:
    server.wait(timeout=20)
except subprocess.TimeoutExpired:
    pass
status, err = stop(server)
check(status == 1 and "CORIO_BACKEND must be io_uring or epoll" in err and time.monotonic() - began < 20,
      f"CORIO_BACKEND=bogus: exit status 1 with the reason (got {status}: {err.strip()!r})")

# A reader of stdout that went away (echo_server | head -1) does not turn the shutdown into SIGPIPE.
reader_r, reader_w = os.pipe()
server, _ = start(stdout=reader_w)
os.close(reader_w)
first_line = os.read(reader_r, 200).decode()
os.close(reader_r)
status, _ = stop(server)
check("listening on port" in first_line and status == 0,
      f"stdout closed by its reader: SIGTERM still exits 0 (got {status})")

# Out of descriptors: the accept loop waits instead of spinning, and serves again once some free up.
# Not under UBSan: its vptr check proves a vtable readable by writing it to a pipe, and with no
# descriptor left reports a valid object as "invalid vptr" and aborts (a ten-line program with one
# virtual call shows it). The release, clang and tsan presets run this part.
if "undefined" in SANITIZERS:
    print("skip: out of descriptors under UBSan (its vptr check needs a free descriptor)")
else:
    for backend in ["epoll", "io_uring"]:
        server, port = start("--backend", backend, descriptors=40)
        held = []
        for _ in range(60):  # more than the 40 descriptors allow: the rest wait in the listen backlog
            held.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        time.sleep(0.5)
        before = cpu_ticks(server.pid)
        time.sleep(2)
        spent = cpu_ticks(server.pid) - before
        check(spent < 50, f"{backend}: out of descriptors, the server idles (CPU ticks in 2 s: {spent} of 200)")
        for client in held:
            client.close()
        time.sleep(1.5)  # the back-off is at most 1 s
        check(echoes(port), f"{backend}: serves again once descriptors free up")
        status, err = stop(server)
        check(status == 0, f"{backend}: SIGTERM after EMFILE: exit status 0 (got {status}; stderr: {err.strip()!r})")

finish()
