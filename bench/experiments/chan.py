"""Experiment `chan`: bench-of-chain, W senders feeding W receivers through bounded channels
(bench/scenarios.md)."""

import sys
from pathlib import Path

from labkit import build, charts
from labkit.context import Context
from labkit.report import markdown_table, spread
from labkit.results import Results
from labkit.runner import Cell
from labkit.targets import at_least, context

NAME = "chan"
TITLE = "bench-of-chain: W senders, W receivers, W bounded channels"
SUMMARY = ("W receiver tasks each own a channel of capacity 256; W sender tasks each send E events into their "
           "receiver's channel; every event adds 1 to one shared counter and is checked for an exit marker. "
           "Million events per second (W*E / time from spawning the first sender until every receiver finished), "
           "median [min-max]; higher is better. `floor` moves the same events through plain rings with one loop: "
           "the cost of the work itself. Memory: resident bytes per idle channel and per task parked on one.")
# The original's six columns, then the two memory readings (bench/scenarios.md).
COLUMNS = ["program", "etype", "worker", "event", "time", "speed", "channel_bytes", "task_bytes"]
KEY = ["program", "etype", "worker"]
METRICS = ["time", "speed", "channel_bytes", "task_bytes"]
BUILDS = {"cpp", "go", "rust", "kotlin"}

PROGRAMS = ["corio", "corio-1t", "go", "go-1t", "tokio", "tokio-1t", "tokio-futures", "kotlin", "floor"]
ETYPES = ["int", "str", "str_ptr", "str_clone"]
WORKERS = {"full": [100, 1_000, 10_000], "quick": [10, 100, 1_000]}
EVENTS = {"full": 10_000, "quick": 1_000}
CAPACITY = 256
REPS = 3  # runs per cell: 9 programs x 4 events x 3 sizes at the lab's default of 5 would take ~30 min
STRING_SIZE = 16
CORIO_BINARY = "chan_corio"
# Which peer each corio row must match or beat (DESIGN.md: channels, on all cores and on one worker).
RIVALS = {"corio": ["go", "tokio", "tokio-futures", "kotlin"], "corio-1t": ["go-1t", "tokio-1t"]}


def _command(ctx: Context, program: str) -> list[str]:
    """How to run `program`, before the scenario's own arguments."""
    threads = ["--threads", "1" if program.endswith("-1t") else "0"]
    base = program.removesuffix("-1t")
    if base == "corio":
        return [ctx.cpp_binary(CORIO_BINARY)] + threads
    if base == "floor":
        return [ctx.cpp_binary("chan_floor")]
    if base == "go":
        return [ctx.go_binary("chan")] + threads
    if base in ("tokio", "tokio-futures"):
        channel = "futures" if base == "tokio-futures" else "tokio"
        return [ctx.rust_binary("chan"), "--channel", channel] + threads
    return [build.java_tool(), "-jar", ctx.kotlin_jar("chan")]  # kotlin; warms up with one untimed run


def cells(ctx: Context) -> list[Cell]:
    mode = "quick" if ctx.quick else "full"
    programs = PROGRAMS
    if not Path(ctx.cpp_binary(CORIO_BINARY)).exists():
        # bench/cpp skips chan_corio until the installed corio has corio/channel.hpp.
        print(f"[chan] no {CORIO_BINARY} (the installed corio has no corio/channel.hpp): the corio and corio-1t "
              "rows are missing", file=sys.stderr, flush=True)
        programs = [program for program in PROGRAMS if not program.startswith("corio")]
    made = []
    for workers in WORKERS[mode]:
        for etype in ETYPES:
            for program in programs:
                argv = _command(ctx, program) + ["-w", str(workers), "-e", str(EVENTS[mode]), "-q", str(CAPACITY),
                                                 "-t", etype, "-s", str(STRING_SIZE)]
                made.append(Cell(f"{program} {etype} W={workers:,}", argv))
    return made


def _scheduled_workers(results: Results) -> list[str]:
    """The worker counts the run scheduled (its mode's), so that one whose runs all failed is a miss with
    no data, not a target left out."""
    return [str(workers) for workers in WORKERS[results.meta.get("mode", "full")]]


def _workers(results: Results) -> list[str]:
    return sorted(results.distinct("worker"), key=int)


def _present(results: Results) -> list[str]:
    return [program for program in PROGRAMS if program in results.distinct("program")]


def _metric(results: Results, program: str, etype: str, workers: str, metric: str = "speed") -> float | None:
    row = results.find(program=program, etype=etype, worker=workers)
    return None if row is None else row.median(metric)


def _memory_table(results: Results, workers: str) -> str:
    """Bytes per idle channel and per parked receiver, read at the largest W (the finest resolution)."""
    rows = []
    for program in _present(results):
        row = results.find(program=program, etype="int", worker=workers)
        if row is not None:
            task = "–" if program == "floor" else spread(row, "task_bytes", 0)
            rows.append([f"`{program}`", spread(row, "channel_bytes", 0), task])
    return markdown_table(["program", f"bytes per idle channel (W={int(workers):,})",
                           f"bytes per task parked on a channel (W={int(workers):,})"], rows)


def table(results: Results) -> str:
    workers = _workers(results)
    rows = []
    for etype in ETYPES:
        for program in _present(results):
            found = [results.find(program=program, etype=etype, worker=w) for w in workers]
            if any(found):
                rows.append([f"`{etype}`", f"`{program}`"] + [spread(row, "speed", 2, 1e-6) for row in found])
    header = ["etype", "program"] + [f"W={int(w):,} (M events/s)" for w in workers]
    events = results.rows[0].values["event"]
    text = (markdown_table(header, rows) + f"\n\nE = {int(events):,} events per sender; capacity {CAPACITY}; "
            f"strings of {STRING_SIZE} bytes.\n\nResident memory (bench/scenarios.md, Memory; the JVM's is live heap "
            "after a full GC):\n\n" + _memory_table(results, workers[-1]))
    if "corio" not in results.distinct("program"):
        text += (f"\n\n**The corio rows are missing**: `{CORIO_BINARY}` was not built, because the installed corio has "
                 "no `corio/channel.hpp` (bench/cpp skips it and says so when configuring).")
    return text


def chart(results: Results, path) -> None:
    workers = _workers(results)
    labels = [f"W={int(w):,}" for w in workers]
    series = _present(results)
    fig, axes = charts.figure(len(ETYPES), "chan: events per second (median, min-max; log scale, higher is better)",
                              columns=2)
    for ax, etype in zip(axes, ETYPES):
        charts.grouped_bars(ax, results.subset(etype=etype), "speed", series, workers, "worker", labels,
                            "events / s (log)", log=True, series_column="program")
        ax.set_title(etype)
    charts.save(fig, path)


def targets(results: Results) -> list:
    found = []
    for etype in ETYPES:
        for workers in _scheduled_workers(results):
            where = f"{etype} W={int(workers):,}"
            for program, rivals in RIVALS.items():
                speed = _metric(results, program, etype, workers)
                found += [at_least(f"{program} / {rival} speed", where, speed,
                                   _metric(results, rival, etype, workers), 1) for rival in rivals]
                found.append(context(f"{program} / floor speed", where, speed,
                                     _metric(results, "floor", etype, workers)))
    return found
