"""Experiment `spawn`: spawn/join, ping-pong wake-ups and CPU-bound fan-out on corio, tokio and Go
(bench/scenarios.md)."""

import os
import sys
from pathlib import Path

from labkit import charts
from labkit.context import Context
from labkit.report import markdown_table, spread
from labkit.results import Results
from labkit.runner import Cell
from labkit.targets import at_least

NAME = "spawn"
TITLE = "spawn, join and wake-up across runtimes"
SUMMARY = ("corio's runtime against tokio and Go, each at 1 thread and at all cores: `spawn_join` spawns tiny "
           "tasks from one task and joins every handle, `ping_pong` has two tasks wake each other through an "
           "event (Go: unbuffered channels), `fanout` joins tasks of about 1 ms of integer hashing each. "
           "Operations per second, median [min-max]; higher is better.")
COLUMNS = ["impl", "threads", "case", "ops", "seconds", "ops_per_sec"]
KEY = ["impl", "threads", "case"]
METRICS = ["seconds", "ops_per_sec"]
BUILDS = {"cpp", "go", "rust"}

IMPLS = ["corio", "tokio", "go"]
CASES = ["spawn_join", "ping_pong", "fanout"]
# case -> (ops full, ops --quick)
SIZES = {"spawn_join": (1_000_000, 20_000), "ping_pong": (1_000_000, 20_000), "fanout": (1_000, 50)}
WORK_ROUNDS = 600_000  # hash rounds per fanout task, fixed by the spec (about 1 ms on the lab's VM)
CORIO_BINARY = "spawn_bench"


def _binary(ctx: Context, impl: str) -> str:
    if impl == "corio":
        return ctx.cpp_binary(CORIO_BINARY)
    return ctx.rust_binary("spawn") if impl == "tokio" else ctx.go_binary("spawn")


def cells(ctx: Context) -> list[Cell]:
    thread_counts = _scheduled_threads()
    impls = IMPLS
    if not Path(_binary(ctx, "corio")).exists():
        # bench/cpp skips spawn_bench when the installed corio lacks corio/runtime.hpp or corio/event.hpp.
        print(f"[spawn] no {CORIO_BINARY} (the installed corio has no runtime/event headers): the corio row "
              "is missing", file=sys.stderr, flush=True)
        impls = [impl for impl in IMPLS if impl != "corio"]
    made = []
    for case in CASES:
        ops = SIZES[case][1 if ctx.quick else 0]
        for threads in thread_counts:
            for impl in impls:
                argv = [_binary(ctx, impl), "--case", case, "--threads", str(threads), "--ops", str(ops),
                        "--work", str(WORK_ROUNDS)]
                made.append(Cell(f"{impl} threads={threads} {case}", argv))
    return made


def _threads(results: Results) -> list[str]:
    return sorted(results.distinct("threads"), key=int)


def _rate(results: Results, impl: str, threads: str, case: str) -> float | None:
    row = results.find(impl=impl, threads=threads, case=case)
    return None if row is None else row.median("ops_per_sec")


def table(results: Results) -> str:
    threads = _threads(results)
    rows = []
    for case in CASES:
        # spawn_join and ping_pong in millions per second, fanout in tasks per second
        digits, scale, unit = (0, 1.0, "tasks/s") if case == "fanout" else (2, 1e-6, "M/s")
        for impl in IMPLS:
            found = [results.find(impl=impl, threads=t, case=case) for t in threads]
            if not any(found):
                continue
            ops = next(row for row in found if row is not None).values["ops"]
            cells = [spread(row, "ops_per_sec", digits, scale) for row in found]
            low, high = (_rate(results, impl, t, case) for t in (threads[0], threads[-1]))
            scaling = f"{high / low:.2f}x" if low and high and len(threads) > 1 else "–"
            rows.append([f"`{case}`", f"{int(ops):,}", f"`{impl}`"] + cells + [scaling, unit])
    header = ["case", "ops", "impl"] + [f"threads={t}" for t in threads] + [f"threads={threads[-1]} / 1", "unit"]
    text = markdown_table(header, rows)
    if "corio" not in results.distinct("impl"):
        text += ("\n\n**The corio row is missing**: `spawn_bench` was not built, because the installed corio has no "
                 "`corio/runtime.hpp` or `corio/event.hpp` (bench/cpp skips it and says so when configuring).")
    return text


def chart(results: Results, path) -> None:
    threads = _threads(results)
    labels = [f"threads={t}" for t in threads]
    series = [impl for impl in IMPLS if impl in results.distinct("impl")]
    fig, axes = charts.figure(len(CASES), "spawn: operations per second (median, min-max; higher is better)")
    ylabels = {"spawn_join": "tasks spawned + joined / s", "ping_pong": "round trips / s",
               "fanout": "1 ms tasks / s"}
    for ax, case in zip(axes, CASES):
        # linear axes: the targets are ratios, which bar heights show directly
        charts.grouped_bars(ax, results.subset(case=case), "ops_per_sec", series, threads, "threads", labels,
                            ylabels[case], log=False)
        ax.set_title(case)
    charts.save(fig, path)


def settings(ctx: Context) -> dict:
    """Stored with the results, so that the report judges the thread counts this machine scheduled."""
    return {"threads": ",".join(str(t) for t in _scheduled_threads())}


def _scheduled_threads() -> list[int]:
    return sorted({1, os.cpu_count() or 1})


def targets(results: Results) -> list:
    # The thread counts the run scheduled (stored with the results; results from before they were
    # stored: those present and 1), so that a count whose runs all failed is a miss with no data.
    found = []
    scheduled = (results.meta.get("settings") or {}).get("threads")
    threads = sorted(set(_threads(results)) | {"1"} | set(scheduled.split(",") if scheduled else []), key=int)
    for case in ("spawn_join", "ping_pong"):
        for t in threads:
            corio = _rate(results, "corio", t, case)
            for peer in ("tokio", "go"):
                found.append(at_least(f"corio {case} rate / {peer}'s", f"threads={t}", corio,
                                      _rate(results, peer, t, case), 1))
    if len(threads) > 1:
        found.append(at_least(f"corio fanout rate at threads={threads[-1]} / at threads=1", "fanout",
                              _rate(results, "corio", threads[-1], "fanout"), _rate(results, "corio", "1", "fanout"),
                              1.7))
    return found
