"""Experiment `post`: cross-thread post into one loop, evpp's QueueInLoop report (bench/scenarios.md)."""

from labkit import charts
from labkit.context import Context
from labkit.report import markdown_table, spread
from labkit.results import Results
from labkit.runner import Cell
from labkit.targets import at_least

NAME = "post"
TITLE = "cross-thread post into one loop"
SUMMARY = ("P producer threads post functors to one consumer loop thread; million functors run per second "
           "(median [min-max]), from releasing the producers until the last functor has run. Higher is better.")
COLUMNS = ["impl", "producers", "tasks", "seconds", "tasks_per_sec"]
KEY = ["impl", "producers"]
METRICS = ["seconds", "tasks_per_sec"]
BUILDS = {"cpp"}

IMPLS = ["mutex-vector", "boost-lockfree", "moodycamel", "moodycamel-bulk", "corio"]
PRODUCERS = [1, 2, 4, 8]
PER_PRODUCER_FULL = 1_000_000
PER_PRODUCER_QUICK = 100_000


def cells(ctx: Context) -> list[Cell]:
    per_producer = PER_PRODUCER_QUICK if ctx.quick else PER_PRODUCER_FULL
    made = []
    for producers in PRODUCERS:
        for impl in IMPLS:
            argv = [ctx.cpp_binary("post_bench"), "--impl", impl, "--producers", str(producers),
                    "--tasks-per-producer", str(per_producer)] + (["--quick"] if ctx.quick else [])
            made.append(Cell(f"{impl} P={producers}", argv))
    return made


def _producers(results: Results) -> list[str]:
    return sorted(results.distinct("producers"), key=int)


def table(results: Results) -> str:
    counts = _producers(results)
    rows = []
    for impl in IMPLS:
        found = [results.find(impl=impl, producers=p) for p in counts]
        if any(found):
            rows.append([f"`{impl}`"] + [spread(row, "tasks_per_sec", 2, 1e-6) for row in found])
    header = ["impl"] + [f"P={p} (Mtasks/s)" for p in counts]
    tasks = ", ".join(f"P={p}: {int(results.find(producers=p).values['tasks']):,}" for p in counts)
    return markdown_table(header, rows) + f"\n\nFunctors per cell: {tasks}."


def chart(results: Results, path) -> None:
    counts = _producers(results)
    series = [impl for impl in IMPLS if impl in results.distinct("impl")]
    fig, axes = charts.figure(1, "post: functors run per second (median, min-max; higher is better)")
    charts.lines(axes[0], results, "tasks_per_sec", series, counts, "producers", "producer threads",
                 "functors per second (log)", log=True)
    charts.save(fig, path)


def _rate(results: Results, impl: str, producers: str) -> float | None:
    row = results.find(impl=impl, producers=producers)
    return None if row is None else row.median("tasks_per_sec")


def targets(results: Results) -> list:
    found = []
    for producers in _producers(results):
        where = f"P={producers}"
        corio = _rate(results, "corio", producers)
        for peer in ("moodycamel", "moodycamel-bulk"):
            found.append(at_least(f"corio rate / {peer} rate", where, corio, _rate(results, peer, producers), 1))
        if int(producers) >= 4:
            found.append(at_least("corio rate / mutex-vector rate", where, corio,
                                  _rate(results, "mutex-vector", producers), 3))
    return found
