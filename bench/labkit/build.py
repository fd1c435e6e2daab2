"""Builds the C++ side (bench/cpp, against an installed corio), the Go peers (bench/peers/go), the
Rust peers (bench/peers/rust, one cargo workspace) and the Kotlin peer (bench/peers/kotlin, Maven)."""

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


def _found(name: str, places: list[Path]) -> str | None:
    """`name` on PATH, else the first of `places` that exists."""
    for found in [shutil.which(name)] + [str(place) for place in places]:
        if found and os.path.exists(found):
            return found
    return None


def _go_tool() -> str:
    found = _found("go", [Path("/usr/local/go/bin/go")])
    if found is None:
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
    found = _found("cargo", [Path(home) / "bin" / "cargo" for home in homes])
    if found is None:
        raise BuildError("no Rust toolchain: put cargo on PATH (https://rustup.rs)")
    return found


def _run_offline_first(step: str, command: list[str], offline_flag: str, cwd, env) -> None:
    """Runs `command` with `offline_flag` first, so a machine whose cache has every dependency uses no
    network; only when that fails runs it again online (a fresh machine has nothing cached; a real
    compile error fails again online and is shown there)."""
    started = time.monotonic()
    print(f"[build] {step} (offline): {' '.join(command)} {offline_flag}", file=sys.stderr, flush=True)
    offline = subprocess.run(command + [offline_flag], cwd=cwd, env=env, capture_output=True, text=True)
    if offline.returncode == 0:
        print(f"[build] {step} (offline): ok in {time.monotonic() - started:.1f}s", file=sys.stderr, flush=True)
        return
    _run(f"{step} (offline failed, fetching dependencies)", command, cwd, env)


def build_rust(ctx: Context) -> None:
    """cargo build --release of the workspace; crates.io only when the local cache lacks a crate."""
    cargo = _cargo_tool()
    env = dict(os.environ, CARGO_TARGET_DIR=str(ctx.rust_dir))
    env["PATH"] = f"{env.get('PATH', '')}{os.pathsep}{Path(cargo).parent}"  # rustup's cargo finds rustc there
    command = [cargo, "build", "--release", "--locked", "--manifest-path",
               str(ctx.root / "bench" / "peers" / "rust" / "Cargo.toml")]
    _run_offline_first("cargo build", command, "--offline", ctx.root, env)


def _mvn_tool() -> str:
    found = _found("mvn", [Path("/opt/maven/bin/mvn"), Path("/usr/share/maven/bin/mvn")])
    if found is None:
        raise BuildError("no Maven: apt-get install maven (scripts/deps.sh bench does it as root)")
    return found


def java_tool() -> str:
    """The java launcher the Kotlin peer runs on: on PATH, else under JAVA_HOME."""
    homes = [Path(os.environ["JAVA_HOME"]) / "bin" / "java"] if os.environ.get("JAVA_HOME") else []
    found = _found("java", homes)
    if found is None:
        raise BuildError("no java: apt-get install openjdk-17-jdk-headless (scripts/deps.sh bench does it as root)")
    return found


def build_kotlin(ctx: Context) -> None:
    """mvn package of bench/peers/kotlin into build/bench/kotlin; Maven Central only when ~/.m2 lacks
    an artifact."""
    java_tool()  # fail here, not at the first run, when there is no JVM
    command = [_mvn_tool(), "-B", "-q", "package", f"-Dlab.build.dir={ctx.kotlin_dir}",
               "-f", str(ctx.root / "bench" / "peers" / "kotlin" / "pom.xml")]
    _run_offline_first("mvn package", command, "--offline", ctx.root, None)


BUILDERS = {"cpp": build_cpp, "go": build_go, "rust": build_rust, "kotlin": build_kotlin}


def build(ctx: Context, needs: set[str]) -> None:
    """Builds every side in `needs` (keys of BUILDERS, in that order); raises BuildError on the first
    failure."""
    for side, builder in BUILDERS.items():
        if side in needs:
            builder(ctx)
