"""Runs every cell of an experiment `reps` times, one process per run, and collects the CSV rows.

A run that exits non-zero, prints no row, or prints a row that does not match the experiment's
columns failed its self-check: the failure is returned and its cell is dropped.
"""

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

from .context import Context

RUN_TIMEOUT_SECONDS = {"full": 600, "quick": 120}


@dataclass(frozen=True)
class Cell:
    label: str  # for progress lines, e.g. "corio N=1000"
    argv: list[str]


def _parse_row(stdout: str, columns: list[str]) -> dict[str, str]:
    lines = [line for line in stdout.splitlines() if line.strip()]
    if len(lines) != 1:
        raise ValueError(f"expected one CSV row, got {len(lines)} lines")
    values = lines[0].strip().split(",")
    if len(values) != len(columns):
        raise ValueError(f"expected {len(columns)} columns, got {len(values)}: {lines[0]}")
    return dict(zip(columns, values))


def _run_once(cell: Cell, columns: list[str], timeout: int) -> dict[str, str]:
    # Its own process group, so that a run that times out goes with everything it started: an echo cell
    # killed alone would leave its server and load client running, pinned, under the runs that follow.
    with subprocess.Popen(cell.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise ValueError(f"timed out after {timeout}s") from None
        except BaseException:  # Ctrl-C, which its own session no longer receives: it goes too
            os.killpg(process.pid, signal.SIGKILL)
            raise
    if process.returncode != 0:
        raise ValueError(f"exit {process.returncode}: {stderr.strip()}")
    return _parse_row(stdout, columns)


def _time_left(began: float, done: int, total: int) -> str:
    """The time the runs still to make would take at the mean pace of those made so far."""
    left = (time.monotonic() - began) / done * (total - done)
    return f"about {int(left // 60)}m{int(left % 60):02d}s left"


def run_cells(name: str, cells: list[Cell], columns: list[str], metrics: list[str],
              ctx: Context) -> tuple[list[dict[str, str]], list[str]]:
    """Runs `reps` rounds over all cells (so machine drift hits every cell alike), every other round
    in reverse order (so no row always runs first, or right after the same row, within its group).

    Returns (every run's row plus a `rep` column, failure messages). A cell with a failed run is
    dropped whole: its other runs are neither made nor returned.
    """
    by_cell: dict[str, list[dict[str, str]]] = {cell.label: [] for cell in cells}
    failures: list[str] = []
    total = len(cells) * ctx.reps
    count = 0
    began = time.monotonic()
    for rep in range(1, ctx.reps + 1):
        for cell in cells if rep % 2 == 1 else reversed(cells):
            count += 1
            if cell.label not in by_cell:
                continue
            started = time.monotonic()
            try:
                row = _run_once(cell, columns, RUN_TIMEOUT_SECONDS["quick" if ctx.quick else "full"])
            except ValueError as error:
                message = f"{name}: {cell.label} run {rep}: {error}"
                print(f"[{name} {count}/{total}] FAILED {message}", file=sys.stderr, flush=True)
                failures.append(message)
                del by_cell[cell.label]
                continue
            by_cell[cell.label].append({**row, "rep": str(rep)})
            shown = " ".join(f"{metric}={row[metric]}" for metric in metrics)
            print(f"[{name} {count}/{total}] {cell.label} run {rep}/{ctx.reps}: {shown} "
                  f"({time.monotonic() - started:.1f}s; {_time_left(began, count, total)})",
                  file=sys.stderr, flush=True)
    return [run for runs in by_cell.values() for run in runs], failures
