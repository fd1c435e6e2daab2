#!/usr/bin/env bash
# Smoke test of examples/echo_server and examples/echo_client: start the server on an ephemeral port,
# echo two lines through it, then the client's 50 connections x 200 messages of 1000 bytes; stop it
# with SIGTERM, and require exit status 0; then start it on a port in use, and require a message and
# exit status 1. The client must report a refused connection, a wrong echo and bad flags.
# usage: echo_server_test.sh <echo_server binary> <backend> <echo_client binary>
set -euo pipefail
server=$1
backend=$2
client=$3
out=$(mktemp)
trap 'rm -f "$out"; [[ -n "${pid:-}" ]] && kill "$pid" 2>/dev/null || true' EXIT
"$server" --port 0 --threads 2 --backend "$backend" >"$out" &
pid=$!
for _ in $(seq 100); do
  port=$(sed -n 's/^echo_server: listening on port \([0-9]*\),.*/\1/p' "$out")
  [[ -n "$port" ]] && break
  sleep 0.05
done
[[ -n "$port" ]] || { echo "echo_server did not report its port"; exit 1; }
exec 3<>"/dev/tcp/127.0.0.1/$port"
for message in "hello echo" "second line"; do
  printf '%s\n' "$message" >&3
  IFS= read -r -t 5 reply <&3
  [[ "$reply" == "$message" ]] || { echo "sent '$message', got '$reply'"; exit 1; }
done
exec 3>&-
"$client" --port "$port" --connections 50 --messages 200 --bytes 1000 --threads 2 --backend "$backend" \
  --timeout 10 | grep -q "50 connection(s) x 200 message(s) of 1000 bytes echoed" ||
  { echo "echo_client against echo_server ($backend) failed"; exit 1; }
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
pid=""
[[ $status -eq 0 ]] || { echo "echo_server exited with $status after SIGTERM"; exit 1; }
# A port that another socket holds (without SO_REUSEPORT): a clear message and exit status 1.
python3 - "$server" "$backend" <<'PY'
import socket, subprocess, sys
holder = socket.socket()
holder.bind(("0.0.0.0", 0))
holder.listen()
port = holder.getsockname()[1]
done = subprocess.run([sys.argv[1], "--port", str(port), "--backend", sys.argv[2]], capture_output=True, text=True,
                      timeout=20)
if done.returncode != 1 or "cannot listen on port" not in done.stderr:
    sys.exit(f"on a busy port: exit {done.returncode}, stderr {done.stderr!r}")
PY
# Bad values: exit status 2 and a message naming the flag (a user trial found --threads -2 running out
# of memory and --port abc listening on an ephemeral port).
for args in "--threads -2" "--threads 0" "--port abc" "--port 70000" "--read-timeout abc" "--read-timeout 0.0001" \
            "--read-timeout nan" "--read-timeout -1" "--read-timeout inf" \
            "--backend foo" "--port"; do
  status=0
  message=$("$server" $args 2>&1 >/dev/null) || status=$?
  flag=${args%% *}
  [[ $status -eq 2 && "$message" == *"$flag"* ]] || { echo "echo_server $args: exit $status, '$message'"; exit 1; }
done
"$server" --help | grep -q "usage: echo_server" || { echo "echo_server --help printed no usage"; exit 1; }
# The client: a refused connection and an echo that differs are failures (exit 1, named); bad flags exit 2.
python3 - "$client" "$backend" <<'PY'
import socket, subprocess, sys, threading
client, backend = sys.argv[1], sys.argv[2]
def run(*args):
    return subprocess.run([client, "--backend", backend, *args], capture_output=True, text=True, timeout=20)
closed = socket.socket()
closed.bind(("127.0.0.1", 0))
port = closed.getsockname()[1]
closed.close()
done = run("--port", str(port), "--connections", "2")
if done.returncode != 1 or "connect" not in done.stderr:
    sys.exit(f"to a closed port: exit {done.returncode}, stderr {done.stderr!r}")
liar = socket.socket()
liar.bind(("127.0.0.1", 0))
liar.listen()
def answer_with_zeros():
    conn, _ = liar.accept()
    with conn:
        got = conn.recv(128)
        conn.sendall(bytes(128))
        conn.recv(1)
threading.Thread(target=answer_with_zeros, daemon=True).start()
done = run("--port", str(liar.getsockname()[1]), "--connections", "1", "--bytes", "128")
if done.returncode != 1 or "differs" not in done.stderr:
    sys.exit(f"from a server that answers zeros: exit {done.returncode}, stderr {done.stderr!r}")
for args in (["--port", "0"], ["--port", "1", "--bytes", "0"], ["--port", "1", "--connections", "x"], []):
    done = run(*args)
    if done.returncode != 2 or "--" not in done.stderr:
        sys.exit(f"echo_client {args}: exit {done.returncode}, stderr {done.stderr!r}")
PY
echo "echo_server ($backend): echoed, stopped on SIGTERM, exit 0; a busy port and bad flags are clear errors;" \
  "echo_client: 10,000 echoes checked; a refused connect, a wrong echo and bad flags are clear errors"
