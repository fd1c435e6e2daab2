"""What the examples' Python tests share: pass/fail lines, and starting and stopping a server example.

Every server is started on an ephemeral port (--port 0) and stopped by its PID; every wait is bounded.
"""

import atexit
import os
import resource
import signal
import subprocess
import sys

failures = []
started = []  # every server started, killed at exit if still running: a test that dies leaves none behind


@atexit.register
def _kill_leftovers():
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait()


def check(condition, what):
    print(("ok  : " if condition else "FAIL: ") + what, flush=True)
    if not condition:
        failures.append(what)


def start(server, *flags, env=None, stdout=subprocess.PIPE, descriptors=None):
    """Starts `server --port 0 flags...`; returns (process, port) once it printed its port, or
    (process, None) if it did not (or stdout is not a pipe)."""
    limit = None if descriptors is None else (lambda: resource.setrlimit(resource.RLIMIT_NOFILE,
                                                                          (descriptors, descriptors)))
    process = subprocess.Popen([server, "--port", "0", *flags], stdout=stdout, stderr=subprocess.PIPE,
                               text=True, env={**os.environ, **(env or {})}, preexec_fn=limit)
    started.append(process)
    if stdout != subprocess.PIPE:
        return process, None
    line = process.stdout.readline()
    port = int(line.split("port ")[1].split(",")[0]) if "listening on port" in line else None
    return process, port


def stop(process):
    """Sends SIGTERM and returns (exit status, stderr), killing the server if it outlives 10 s; what it printed on
    stdout after its first line is kept as process.rest_of_stdout. A sanitizer's report in its stderr is a failure of
    its own."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        out, err = process.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        process.rest_of_stdout = out or ""
        return None, err
    process.rest_of_stdout = out or ""
    report = err.find("Sanitizer")
    check(report == -1, f"{os.path.basename(process.args[0])}: no sanitizer report"
          + ("" if report == -1 else f" (got: {err[max(0, report - 20):report + 300]!r})"))
    return process.returncode, err


def bad_flags(program, cases):
    """Each case, (arguments, the flag at fault), must exit with status 2 and a first line naming that flag."""
    for args, flag in cases:
        done = subprocess.run([program, *args], capture_output=True, text=True, timeout=20)
        said = done.stderr.partition("\n")[0]
        check(done.returncode == 2 and flag in said,
              f"{os.path.basename(program)} {' '.join(args)}: exit status 2 naming {flag} "
              f"(got {done.returncode}: {said!r})")


def finish():
    sys.exit(1 if failures else 0)
