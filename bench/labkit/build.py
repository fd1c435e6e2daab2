"""Builds the C++ side (bench/cpp, against an installed corio), the Go peers (bench/peers/go) and the
Rust peers (bench/peers/rust, one cargo workspace)."""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

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
    # -U drops the corio_DIR found by an earlier configure, so a new --prefix is honoured.
    configure = ["cmake", "-S", str(source), "-B", str(ctx.build_dir), "-G", "Ninja", "-U", "corio_DIR",
                 "-DCMAKE_BUILD_TYPE=Release", f"-DCMAKE_PREFIX_PATH={ctx.prefix}"]
    try:
        _run("configure bench/cpp", configure, ctx.root)
    except BuildError as error:
        raise BuildError(f"{error}; is corio installed under {ctx.prefix}? (cmake --install <build> --prefix "
                         f"{ctx.prefix})") from None
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
    # One command per folder; internal/ holds the package they share.
    for command in sorted(p.name for p in source.iterdir() if p.is_dir() and p.name != "internal"):
        _run(f"go build {command}", [_go_tool(), "build", "-buildvcs=false", "-o", ctx.go_binary(command),
                                     f"./{command}"], source, env)


def _cargo_tool() -> str:
    """cargo on PATH, else where rustup installs it (often off PATH)."""
    homes = ([os.environ["CARGO_HOME"]] if os.environ.get("CARGO_HOME") else []) + [Path.home() / ".cargo"]
    for found in [shutil.which("cargo")] + [str(Path(home) / "bin" / "cargo") for home in homes]:
        if found and os.path.exists(found):
            return found
    raise BuildError("no Rust toolchain: put cargo on PATH (https://rustup.rs)")


def build_rust(ctx: Context) -> None:
    """cargo build --release of the workspace, offline first; crates.io only when the cache lacks a crate."""
    cargo = _cargo_tool()
    env = dict(os.environ, CARGO_TARGET_DIR=str(ctx.rust_dir))
    env["PATH"] = f"{env.get('PATH', '')}{os.pathsep}{Path(cargo).parent}"  # rustup's cargo finds rustc there
    command = [cargo, "build", "--release", "--locked", "--manifest-path",
               str(ctx.root / "bench" / "peers" / "rust" / "Cargo.toml")]
    started = time.monotonic()
    print(f"[build] cargo build --offline: {' '.join(command)} --offline", file=sys.stderr, flush=True)
    offline = subprocess.run(command + ["--offline"], cwd=ctx.root, env=env, capture_output=True, text=True)
    if offline.returncode == 0:
        print(f"[build] cargo build --offline: ok in {time.monotonic() - started:.1f}s", file=sys.stderr, flush=True)
        return
    # A fresh machine has no crates cached; a real compile error fails again below and is shown there.
    _run("cargo build (offline failed, fetching from crates.io)", command, ctx.root, env)


BUILDERS = {"cpp": build_cpp, "go": build_go, "rust": build_rust}


def build(ctx: Context, needs: set[str]) -> None:
    """Builds every side in `needs` ("cpp", "go", "rust"); raises BuildError on the first failure."""
    for side in ("cpp", "go", "rust"):
        if side in needs:
            BUILDERS[side](ctx)
