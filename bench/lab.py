#!/usr/bin/python3
"""corio benchmark lab: build, run, report.

Builds what the selected experiments need: bench/cpp against an installed corio (into build/bench),
the Go, Rust and Kotlin peers (into build/bench/go, rust and kotlin); runs every cell of the selected
experiments of bench/scenarios.md several times, writes results/<experiment>.csv (medians) with
results/<experiment>-runs.csv (every run), publishes them under docs/bench/data/ (a full run), and
renders docs/bench/REPORT.md from the published results: one table and one chart per experiment and
the Targets section.

    /usr/bin/python3 bench/lab.py --prefix build/prefix [--only coro,post] [--quick] [--reps N]

Experiments not selected keep their section from their last published full run. A quick run
writes and renders under build/lab-quick/ only. Exits 1 if a build fails or any run fails its
self-check.
"""

import argparse
import importlib.util
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.dont_write_bytecode = True  # keep bench/ free of __pycache__

from experiments import EXPERIMENTS  # noqa: E402  (found through the path set just above)
from labkit import build, machine, report, results, runner  # noqa: E402
from labkit.context import Context  # noqa: E402

EXPERIMENT_NAMES = [experiment.NAME for experiment in EXPERIMENTS]


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prefix", type=Path, default=ROOT / "build" / "prefix",
                        help="corio install prefix (default: build/prefix)")
    parser.add_argument("--only", default=",".join(EXPERIMENT_NAMES),
                        help=f"comma-separated experiments to run (default: all of {','.join(EXPERIMENT_NAMES)})")
    parser.add_argument("--quick", action="store_true", help="smaller sizes and 3 runs per cell (CI smoke test)")
    parser.add_argument("--reps", type=int, help="runs per cell (default: 5, or 3 with --quick; an experiment "
                                                 "may set its own, as echo does)")
    args = parser.parse_args(argv)
    args.only = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = [name for name in args.only if name not in EXPERIMENT_NAMES]
    if unknown or not args.only:
        parser.error(f"--only takes some of {','.join(EXPERIMENT_NAMES)}, got {','.join(unknown) or 'nothing'}")
    args.reps_given = args.reps is not None  # else an experiment's own REPS, if it has one, wins
    if args.reps is None:
        args.reps = 3 if args.quick else 5
    if args.reps < 1:
        parser.error("--reps must be at least 1")
    return args


def main(argv: list[str]) -> int:
    args = parse(argv)
    if importlib.util.find_spec("matplotlib") is None:  # checked before any build, to fail fast
        print("lab: needs matplotlib; run with /usr/bin/python3 (Debian's python3-matplotlib)", file=sys.stderr)
        return 1

    ctx = Context(ROOT, args.prefix.resolve(), args.quick, args.reps)
    selected = [experiment for experiment in EXPERIMENTS if experiment.NAME in args.only]
    started = time.monotonic()
    try:
        build.build(ctx, set().union(*(experiment.BUILDS for experiment in selected)))
    except build.BuildError as error:
        print(f"lab: {error}", file=sys.stderr)
        return 1

    commit = machine.source_commit(str(ROOT))
    failures: list[str] = []
    for experiment in selected:
        load = os.getloadavg()[0]
        if load > 0.5 * (os.cpu_count() or 1):
            print(f"lab: warning: load average {load:.1f} before {experiment.NAME}; its numbers will be noisy",
                  file=sys.stderr)
        own = ctx if args.reps_given or not hasattr(experiment, "REPS") else replace(ctx, reps=experiment.REPS)
        runs, failed = runner.run_cells(experiment.NAME, experiment.cells(own), experiment.COLUMNS,
                                        experiment.METRICS, own)
        rows = results.aggregate(runs, experiment.COLUMNS, experiment.KEY, experiment.METRICS)
        settings = experiment.settings(own) if hasattr(experiment, "settings") else {}
        results.save(ctx.results_dir, experiment.NAME, experiment.COLUMNS, runs, rows,
                     "quick" if ctx.quick else "full", own.reps, load, failed, commit, settings)
        results.publish(ctx.results_dir, ctx.published_dir, experiment.NAME)
        failures += failed

    sections = []
    for experiment in EXPERIMENTS:
        stored = results.load(ctx.published_dir, experiment.NAME, experiment.KEY, experiment.METRICS)
        if stored is not None:
            sections.append((experiment, stored))
        else:
            (ctx.docs_dir / f"{experiment.NAME}.png").unlink(missing_ok=True)
    report.render(ctx.docs_dir / "REPORT.md", sections)

    elapsed = time.monotonic() - started
    print(f"lab: wrote {ctx.docs_dir / 'REPORT.md'} in {elapsed:.0f}s", file=sys.stderr)
    for failure in failures:
        print(f"lab: FAILED {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
