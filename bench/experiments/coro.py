"""Experiment `coro`: create and switch cost of one coroutine (bench/scenarios.md)."""

from labkit import charts
from labkit.context import Context
from labkit.report import markdown_table, spread
from labkit.results import Results
from labkit.runner import Cell
from labkit.targets import at_least, at_most

NAME = "coro"
TITLE = "coroutine create and switch cost"
SUMMARY = ("Stackless C++20 coroutines (bare and corio) against stackful ones (Boost.Context, ucontext) and "
           "goroutines: nanoseconds to create one, nanoseconds per switch (one resume + suspend round trip), "
           "and resident bytes per live coroutine. Lower is better everywhere.")
COLUMNS = ["impl", "coroutines", "switches", "create_ns", "switch_ns", "bytes_per_coroutine"]
KEY = ["impl", "coroutines"]
METRICS = ["create_ns", "switch_ns", "bytes_per_coroutine"]
BUILDS = {"cpp", "go"}

CPP_IMPLS = ["cxx20-bare", "corio", "boost-context", "ucontext"]
GO_IMPLS = ["goroutine", "goroutine-chan"]
IMPLS = CPP_IMPLS + GO_IMPLS
# (coroutines, switches per coroutine full, switches per coroutine --quick)
SIZES = [(1, 10_000_000, 200_000), (1_000, 100, 20), (30_000, 100, 20)]


def cells(ctx: Context) -> list[Cell]:
    made = []
    for count, full, quick in SIZES:
        for impl in IMPLS:
            binary = ctx.cpp_binary("coro_bench") if impl in CPP_IMPLS else ctx.go_binary("coro")
            argv = [binary, "--impl", impl, "--coroutines", str(count),
                    "--switches-each", str(quick if ctx.quick else full)] + (["--quick"] if ctx.quick else [])
            made.append(Cell(f"{impl} N={count:,}", argv))
    return made


def _counts(results: Results) -> list[str]:
    return sorted(results.distinct("coroutines"), key=int)


def table(results: Results) -> str:
    rows = []
    for count in _counts(results):
        for impl in IMPLS:
            row = results.find(impl=impl, coroutines=count)
            if row is None:
                continue
            rows.append([f"`{impl}`", f"{int(count):,}", f"{int(row.values['switches']):,}",
                         spread(row, "create_ns"), spread(row, "switch_ns", 2), spread(row, "bytes_per_coroutine", 0)])
    return markdown_table(["impl", "coroutines", "switches timed", "create ns", "switch ns", "bytes / coroutine"],
                          rows)


def chart(results: Results, path) -> None:
    counts = _counts(results)
    labels = [f"N={int(count):,}" for count in counts]
    series = [impl for impl in IMPLS if impl in results.distinct("impl")]
    fig, axes = charts.figure(3, "coro: create and switch cost (median, min-max; log scale, lower is better)")
    panels = [("switch_ns", "ns per switch"), ("create_ns", "ns per create"),
              ("bytes_per_coroutine", "resident bytes per coroutine")]
    for ax, (metric, ylabel) in zip(axes, panels):
        charts.grouped_bars(ax, results, metric, series, counts, "coroutines", labels, ylabel, log=True)
    charts.save(fig, path)


def _metric(results: Results, impl: str, count: str, metric: str) -> float | None:
    row = results.find(impl=impl, coroutines=count)
    return None if row is None else row.median(metric)


def targets(results: Results) -> list:
    # Every count scheduled, whatever rows are present: a count whose runs all failed is a miss ("no data").
    found = []
    for count in (str(count) for count, _, _ in SIZES):
        where = f"N={int(count):,}"
        corio = _metric(results, "corio", count, "switch_ns")
        found.append(at_most("corio switch / cxx20-bare switch", where, corio,
                             _metric(results, "cxx20-bare", count, "switch_ns"), 3))
        for peer, factor in (("boost-context", 2), ("ucontext", 10), ("goroutine", 10)):
            found.append(at_least(f"{peer} switch / corio switch", where,
                                  _metric(results, peer, count, "switch_ns"), corio, factor))
    for count in (str(count) for count, _, _ in SIZES):
        found.append(at_most("corio create / cxx20-bare create", f"N={int(count):,}",
                             _metric(results, "corio", count, "create_ns"),
                             _metric(results, "cxx20-bare", count, "create_ns"), 1))
    return found
