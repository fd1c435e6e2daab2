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
           "(median [min-max]), from releasing the producers until the last functor has run. Higher is better. "
           "Each peer runs twice: its consumer busy-polling, and sleeping on an eventfd that producers write only "
           "when a `notified` flag was clear, as evpp's loop does (`-wake`); the targets compare corio with the "
           "faster of the two.")
COLUMNS = ["impl", "producers", "tasks", "seconds", "tasks_per_sec"]
KEY = ["impl", "producers"]
METRICS = ["seconds", "tasks_per_sec"]
BUILDS = {"cpp"}

PEERS = ["mutex-vector", "boost-lockfree", "moodycamel", "moodycamel-bulk"]
WAKE = "-wake"  # the same peer with evpp's eventfd wake instead of busy-polling
IMPLS = [impl for peer in PEERS for impl in (peer, peer + WAKE)] + ["corio"]
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


def _best(results: Results, peer: str, producers: str) -> tuple[float | None, str]:
    """The faster configuration of `peer` (busy-polling or -wake) at P producers: (rate, its impl). Both must
    have run: with one missing the faster is unknown, so the rate is None (the target reads "no data" and
    misses, as a missing row does everywhere) and the text names what is missing."""
    rates = {impl: _rate(results, impl, producers) for impl in (peer, peer + WAKE)}
    absent = [impl for impl, rate in rates.items() if rate is None]
    if absent:
        return None, "no " + ", ".join(absent)
    return max((rate, impl) for impl, rate in rates.items())


def targets(results: Results) -> list:
    found = []
    for producers in (str(p) for p in PRODUCERS):  # every count scheduled: one with no rows is a miss, not absent
        corio = _rate(results, "corio", producers)
        needs = [("moodycamel", 1), ("moodycamel-bulk", 1)] + ([("mutex-vector", 3)] if int(producers) >= 4 else [])
        for peer, factor in needs:
            best, impl = _best(results, peer, producers)
            found.append(at_least(f"corio rate / the faster of {peer}, {peer}{WAKE}", f"P={producers} ({impl})",
                                  corio, best, factor))
    return found
