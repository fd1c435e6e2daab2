#!/usr/bin/python3
"""One run of one cell of the lab's `echo` experiment (bench/scenarios.md); prints one CSV row.

    echo_cell.py --name ROW --client ECHO_LOAD --clients C --bytes L --seconds D -- SERVER ARGS...

The server's arguments hold `{port}` where the port goes. Steps:
  1. pick a free loopback port (bind to port 0, read it, close);
  2. start the server pinned to CPU 0 and wait until it accepts a connection and echoes a probe
     (if it exits first, for instance because the port was taken meanwhile, try again on a new port);
  3. run echo_load pinned to CPU 1 with --server-pid, so it reads the server's CPU times from /proc at
     the start and end of its timed window;
  4. stop the server by its PID (SIGTERM, SIGKILL after 5 s) and check it was alive until then;
  5. self-check (zero client errors, at least one request, the server survived) and print
     `server,clients,bytes,seconds,requests_per_sec,errors,server_user_s,server_sys_s,server_cpu_us_per_req`.
A failed step prints why to stderr and exits 1, with no row.
"""

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time

READY_TIMEOUT_S = 10
STOP_TIMEOUT_S = 5
PORT_ATTEMPTS = 3
PROBE = b"echo_cell probe\n"


class Failed(Exception):
    pass


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def cpus() -> tuple[int, int]:
    """CPU 0 for the server and CPU 1 for the client; on a one-CPU machine they share it."""
    allowed = sorted(os.sched_getaffinity(0))
    return allowed[0], allowed[1] if len(allowed) > 1 else allowed[0]


def pinned(cpu: int):
    return lambda: os.sched_setaffinity(0, {cpu})


def echoes(port: int) -> bool:
    """True once the server accepts and echoes PROBE back whole; False while it refuses connections."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as conn:
            conn.sendall(PROBE)
            got = b""
            while len(got) < len(PROBE):
                chunk = conn.recv(len(PROBE) - len(got))
                if not chunk:
                    break
                got += chunk
    except ConnectionRefusedError:
        return False
    except OSError as error:
        raise Failed(f"probing port {port}: {error}") from None
    if got != PROBE:
        raise Failed(f"the server answered the probe with {got!r}, not its echo")
    return True


def tail(log) -> str:
    log.seek(0)
    lines = log.read().decode(errors="replace").strip().splitlines()
    return " | ".join(lines[-5:]) or "(no output)"


def start(argv: list[str], cpu: int, log) -> tuple[subprocess.Popen, int]:
    """Starts the server on a free port and returns it once it echoes."""
    for attempt in range(1, PORT_ATTEMPTS + 1):
        port = free_port()
        command = [arg.replace("{port}", str(port)) for arg in argv]
        server = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                  env=dict(os.environ, GOMAXPROCS="1"), preexec_fn=pinned(cpu))
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if server.poll() is not None:
                break
            try:
                if echoes(port):
                    return server, port
            except Failed:
                stop(server)
                raise
            time.sleep(0.02)
        exited = server.poll() is not None
        stop(server)
        if not exited:
            raise Failed(f"the server did not accept on port {port} within {READY_TIMEOUT_S}s: {tail(log)}")
        print(f"echo_cell: attempt {attempt}: the server exited before accepting ({tail(log)})", file=sys.stderr)
    raise Failed(f"the server did not start in {PORT_ATTEMPTS} attempts")


def stop(server: subprocess.Popen) -> None:
    if server.poll() is None:
        server.terminate()
        try:
            server.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def run(args: argparse.Namespace) -> str:
    server_cpu, client_cpu = cpus()
    with tempfile.TemporaryFile() as log:
        server, port = start(args.server, server_cpu, log)
        try:
            command = [args.client, "--address", f"127.0.0.1:{port}", "--clients", str(args.clients),
                       "--bytes", str(args.bytes), "--seconds", str(args.seconds), "--cpu", str(client_cpu),
                       "--server-pid", str(server.pid)]
            client = subprocess.run(command, capture_output=True, text=True, timeout=args.seconds + 60,
                                    preexec_fn=pinned(client_cpu))
            survived = server.poll() is None
        finally:
            stop(server)
        if not survived:
            raise Failed(f"the server exited during the run (status {server.returncode}): {tail(log)}")
    lines = client.stdout.strip().splitlines()
    if not lines:
        raise Failed(f"echo_load exited {client.returncode} with no result: {client.stderr.strip()}")
    found = dict(field.split("=", 1) for field in lines[-1].split())
    requests, errors = int(found["requests"]), int(found["errors"])
    if errors or client.returncode != 0:
        raise Failed(f"{errors} client errors (echo_load exit {client.returncode}): {client.stderr.strip()}")
    if requests <= 0:
        raise Failed("no request completed")
    user, system = float(found["server_user_s"]), float(found["server_sys_s"])
    cpu_us_per_req = (user + system) * 1e6 / requests
    return (f"{args.name},{args.clients},{args.bytes},{found['seconds']},{found['requests_per_sec']},{errors},"
            f"{user:.2f},{system:.2f},{cpu_us_per_req:.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--name", required=True, help="the row's server name")
    parser.add_argument("--client", required=True, help="path to echo_load")
    parser.add_argument("--clients", type=int, required=True)
    parser.add_argument("--bytes", type=int, required=True)
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("server", nargs="+", help="the server's command line, with {port}")
    args = parser.parse_args()
    try:
        print(run(args))
    except (Failed, subprocess.TimeoutExpired, KeyError, ValueError) as error:
        print(f"echo_cell: {args.name} clients={args.clients} bytes={args.bytes}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
