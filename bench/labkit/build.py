"""Builds the C++ side (bench/cpp, against an installed corio) and the Go peers (bench/peers/go)."""

import os
import shutil
import subprocess
import sys
import time

from .context import Context


class BuildError(Exception):
    pass


def _run(step: str, command: list[str], cwd, env=None) -> None:
    started = time.monotonic()
    print(f"[build] {step}: {' '.join(command)}", file=sys.stderr, flush=True)
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        output = (done.stdout + done.stderr).strip().splitlines()
        print("\n".join(output[-40:]), file=sys.stderr)
        raise BuildError(f"{step} failed (exit {done.returncode})")
    print(f"[build] {step}: ok in {time.monotonic() - started:.1f}s", file=sys.stderr, flush=True)


def build_cpp(ctx: Context) -> None:
    source = ctx.root / "bench" / "cpp"
    _run("configure bench/cpp", ["cmake", "-S", str(source), "-B", str(ctx.build_dir), "-G", "Ninja",
                                 "-DCMAKE_BUILD_TYPE=Release", f"-DCMAKE_PREFIX_PATH={ctx.prefix}"], ctx.root)
    _run("build bench/cpp", ["cmake", "--build", str(ctx.build_dir)], ctx.root)


def _go_tool() -> str:
    found = shutil.which("go") or "/usr/local/go/bin/go"
    if not os.path.exists(found):
        raise BuildError("no Go toolchain: put go on PATH")
    return found


def build_go(ctx: Context) -> None:
    env = dict(os.environ)
    env.setdefault("GOTOOLCHAIN", "local")  # never download a toolchain
    if not any(name in env for name in ("GOCACHE", "XDG_CACHE_HOME", "HOME")):
        env["GOCACHE"] = str(ctx.build_dir / "go-cache")
    ctx.go_dir.mkdir(parents=True, exist_ok=True)
    source = ctx.root / "bench" / "peers" / "go"
    for command in sorted(p.name for p in source.iterdir() if p.is_dir()):
        _run(f"go build {command}", [_go_tool(), "build", "-buildvcs=false", "-o", ctx.go_binary(command),
                                     f"./{command}"], source, env)


BUILDERS = {"cpp": build_cpp, "go": build_go}


def build(ctx: Context, needs: set[str]) -> None:
    """Builds every side in `needs` ("cpp", "go"); raises BuildError on the first failure."""
    for side in ("cpp", "go"):
        if side in needs:
            BUILDERS[side](ctx)
