"""Aggregates runs into one row per cell (median of each metric, with min and max) and stores them.

Files per experiment, under results/:
  <name>.csv       the experiment's columns exactly, one row per cell, metrics are medians
  <name>-runs.csv  every run, the same columns plus `rep` (the report's [min-max] come from here)
  <name>-meta.json when, where and how it was measured (date, source commit, CPU and kernel, quick or
  full, repetitions, the experiment's own settings, load, failures)
A full run publishes them (publish) under docs/bench/data/, which the report is rendered from.
"""

import csv
import json
import shutil
import statistics
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from . import machine


@dataclass
class Aggregate:
    values: dict[str, str]  # one row of <name>.csv
    low: dict[str, float] = field(default_factory=dict)
    high: dict[str, float] = field(default_factory=dict)

    def median(self, metric: str) -> float:
        return float(self.values[metric])


@dataclass
class Results:
    rows: list[Aggregate]
    meta: dict
    runs: list[dict[str, str]] = field(default_factory=list)  # every run, with its `rep` (<name>-runs.csv)

    def find(self, **key) -> Aggregate | None:
        """The first row whose columns equal every value of `key`, or None."""
        return next(iter(self.subset(**key).rows), None)

    def subset(self, **key) -> "Results":
        """The rows whose columns equal every value of `key`, with the same metadata."""
        matching = [row for row in self.rows if all(row.values[column] == str(value) for column, value in key.items())]
        return Results(matching, self.meta, self.runs)

    def distinct(self, column: str) -> list[str]:
        seen: list[str] = []
        for row in self.rows:
            if row.values[column] not in seen:
                seen.append(row.values[column])
        return seen


def format_number(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 1e6 else f"{value:.6g}"


def aggregate(runs: list[dict[str, str]], columns: list[str], key: list[str], metrics: list[str]) -> list[Aggregate]:
    groups: dict[tuple, list[dict[str, str]]] = {}
    for run in runs:
        groups.setdefault(tuple(run[column] for column in key), []).append(run)
    rows = []
    for group in groups.values():
        values = {column: group[0][column] for column in columns}
        row = Aggregate(values)
        for metric in metrics:
            samples = [float(run[metric]) for run in group]
            values[metric] = format_number(statistics.median(samples))
            row.low[metric], row.high[metric] = min(samples), max(samples)
        rows.append(row)
    return rows


def _paths(directory: Path, name: str) -> tuple[Path, Path, Path]:
    return directory / f"{name}.csv", directory / f"{name}-runs.csv", directory / f"{name}-meta.json"


def _write_csv(path: Path, columns: list[str], rows: list[dict[str, str]]) -> None:
    with path.open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def save(directory: Path, name: str, columns: list[str], runs: list[dict[str, str]], rows: list[Aggregate],
         mode: str, reps: int, load: float, failures: list[str], commit: str, settings: dict) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    main, all_runs, meta = _paths(directory, name)
    _write_csv(main, columns, [row.values for row in rows])
    _write_csv(all_runs, columns + ["rep"], runs)
    measured = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    info = {"measured": measured, "commit": commit, "cpu": machine.cpu_model(), "kernel": machine.kernel(),
            "mode": mode, "reps": reps, "settings": settings, "load_at_start": round(load, 2), "failures": failures}
    meta.write_text(json.dumps(info, indent=2))


def publish(source: Path, target: Path, name: str) -> None:
    """Copies an experiment's stored results from `source` to `target` (nothing if they are the same
    directory), replacing what `target` had for it."""
    if source.resolve() == target.resolve():
        return
    target.mkdir(parents=True, exist_ok=True)
    for path in _paths(source, name):
        if path.exists():
            shutil.copyfile(path, target / path.name)
        else:
            (target / path.name).unlink(missing_ok=True)


def load(directory: Path, name: str, key: list[str], metrics: list[str]) -> Results | None:
    """The stored results of an experiment, or None if it was never run here."""
    main, all_runs, meta = _paths(directory, name)
    if not main.exists():
        return None
    with main.open() as source:
        rows = [Aggregate(dict(values)) for values in csv.DictReader(source)]
    runs = []
    if all_runs.exists():
        with all_runs.open() as source:
            runs = list(csv.DictReader(source))
    for row in rows:
        mine = [run for run in runs if all(run[column] == row.values[column] for column in key)]
        for metric in metrics:
            samples = [float(run[metric]) for run in mine] or [row.median(metric)]
            row.low[metric], row.high[metric] = min(samples), max(samples)
    info = json.loads(meta.read_text()) if meta.exists() else {}
    return Results(rows, info, runs)
