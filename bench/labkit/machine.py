"""A short description of the machine the lab ran on: CPU, cores, kernel, compilers, date."""

import os
import platform
import re
import subprocess
from datetime import datetime, timezone


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def kernel() -> str:
    uname = platform.uname()
    return f"{uname.system} {uname.release} {uname.machine}"


def _first_line(command: list[str]) -> str:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "not found"
    lines = (done.stdout or done.stderr).strip().splitlines()
    return lines[0] if lines else "unknown"


def _version(commands: list[list[str]]) -> str:
    """The first line printed by the first of `commands` that runs (toolchains often live off PATH)."""
    for command in commands:
        version = _first_line(command)
        if version != "not found":
            return version
    return "not found"


def source_commit(root: str) -> str:
    """The commit the sources under `root` are at, `-dirty` if a tracked file differs from it (the lab's own
    report, docs/bench/, aside), or "unknown" outside a git clone."""
    try:
        head = subprocess.run(["git", "-C", root, "rev-parse", "--short=12", "HEAD"], capture_output=True,
                              text=True, timeout=30)
        changed = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no", "--", ".",
                                  ":(exclude)docs/bench"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    if head.returncode != 0 or changed.returncode != 0:
        return "unknown"
    return head.stdout.strip() + ("-dirty" if changed.stdout.strip() else "")


def describe() -> list[tuple[str, str]]:
    """(label, value) pairs for the report's Machine section."""
    gxx = _first_line(["g++", "--version"])
    java_home = os.environ.get("JAVA_HOME")
    javas = [["java", "-version"]] + ([[os.path.join(java_home, "bin", "java"), "-version"]] if java_home else [])
    return [
        ("CPU", cpu_model()),
        ("Cores", str(os.cpu_count())),
        ("Kernel", kernel()),
        ("g++", re.sub(r"^g\+\+\s*", "", gxx)),
        ("Go", _version([["go", "version"], ["/usr/local/go/bin/go", "version"]])),
        ("Rust", _version([["rustc", "--version"], [os.path.expanduser("~/.cargo/bin/rustc"), "--version"]])),
        ("Java", _version(javas)),  # java prints its version to stderr, which _first_line reads too
        ("Report rendered", datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")),
    ]
