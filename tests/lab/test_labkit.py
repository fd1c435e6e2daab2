"""Unit tests of the lab's bookkeeping (bench/labkit, bench/experiments): what the report counts as a
target, how it prints a ratio, how results are published and kept, and how a run that hangs is
stopped. Run by `make test`:

    python3 -m unittest discover -s tests/lab
"""

import sys
import tempfile
import time
import unittest
from pathlib import Path

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from experiments import chan, coro, echo, spawn  # noqa: E402
from labkit.report import _measured  # noqa: E402
from labkit import results  # noqa: E402
from labkit.results import Aggregate, Results  # noqa: E402
from labkit.runner import Cell, _run_once  # noqa: E402
from labkit.targets import at_least, at_most  # noqa: E402


def results_of(rows: list[dict[str, str]], mode: str = "full", settings: dict | None = None) -> Results:
    made = []
    for values in rows:
        row = Aggregate(dict(values))
        for metric, value in values.items():
            try:
                row.low[metric] = row.high[metric] = float(value)
            except ValueError:
                pass
        made.append(row)
    return Results(made, {"mode": mode, "settings": settings or {}})


def scored_without_data(targets) -> int:
    return sum(target.scored and target.ratio is None for target in targets)


def running(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie, killed and not yet reaped by init, is not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return False


class ShownRatio(unittest.TestCase):
    def test_a_ratio_two_decimals_would_round_onto_its_limit_gets_more(self):
        missed = at_least("a / b", "here", 0.9492, 1.0, 0.95)
        self.assertFalse(missed.passed)
        self.assertEqual(_measured(missed), "0.949x")
        self.assertEqual(_measured(at_least("a / b", "here", 0.9496, 1.0, 0.95)), "0.9496x")
        self.assertEqual(_measured(at_most("a / b", "here", 1.0004, 1.0, 1)), "1.0004x")

    def test_other_ratios_keep_two_decimals(self):
        self.assertEqual(_measured(at_least("a / b", "here", 1.234, 1.0, 0.95)), "1.23x")


class ScheduledSizesAreJudged(unittest.TestCase):
    """A size whose runs all failed has no rows: its targets must be misses with no data, not left out."""

    def test_coro_counts_a_missing_size_as_misses(self):
        rows = [{"impl": impl, "coroutines": str(count), "switches": "10", "create_ns": "5", "switch_ns": "5",
                 "bytes_per_coroutine": "100"}
                for impl in coro.IMPLS for count, _, _ in coro.SIZES if count != 30_000]
        targets = coro.targets(results_of(rows))
        self.assertEqual(len(targets), 5 * len(coro.SIZES))
        self.assertEqual(scored_without_data(targets), 5)

    def test_chan_counts_a_missing_worker_count_as_misses(self):
        sizes = chan.WORKERS["full"]
        rows = [{"program": program, "etype": etype, "worker": str(workers), "event": "10", "time": "1",
                 "speed": "1", "channel_bytes": "1", "task_bytes": "1"}
                for program in chan.PROGRAMS for etype in chan.ETYPES for workers in sizes[:-1]]
        targets = chan.targets(results_of(rows))
        per_size = len(targets) // len(sizes)
        self.assertGreater(per_size, 0)
        self.assertEqual(scored_without_data(targets), sum(t.scored for t in targets) // len(sizes))

    def test_spawn_counts_a_missing_thread_count_as_misses(self):
        rows = [{"impl": impl, "threads": "1", "case": case, "ops": "100", "seconds": "1", "ops_per_sec": "100"}
                for impl in spawn.IMPLS for case in ("spawn_join", "ping_pong", "fanout")]
        # The run scheduled 1 and 8 threads (stored with its results), whatever this machine has.
        targets = spawn.targets(results_of(rows, settings={"threads": "1,8"}))
        # at 8: spawn_join and ping_pong against tokio and Go, and the fan-out's scaling
        self.assertEqual(scored_without_data(targets), 5)
        self.assertIn("threads=8", " ".join(target.claim + target.where for target in targets))


class EchoSameRoundRatios(unittest.TestCase):
    """Beside its scored targets (medians), echo shows each comparison run by run: the median, over the
    rounds, of the two servers' ratio within one round."""

    @staticmethod
    def run_of(server: str, rep: int, requests_per_sec: float) -> dict[str, str]:
        return {"server": server, "clients": "50", "bytes": "128", "rep": str(rep),
                "requests_per_sec": str(requests_per_sec)}

    def test_the_context_row_is_the_median_of_same_round_ratios_and_is_not_scored(self):
        # Medians say 200 / 190 = 1.05; round by round it is 100/190, 200/95, 210/205: median 1.02.
        measured = results_of([])
        measured.runs = [self.run_of("corio-epoll", 1, 100), self.run_of("c-epoll", 1, 190),
                         self.run_of("corio-epoll", 2, 200), self.run_of("c-epoll", 2, 95),
                         self.run_of("corio-epoll", 3, 210), self.run_of("c-epoll", 3, 205)]
        row = echo._same_round(measured, "requests_per_sec", "corio-epoll", "c-epoll", [(50, 128)])
        self.assertFalse(row.scored)
        self.assertAlmostEqual(row.ratio, 210 / 205)
        self.assertIn("lowest clients=50 bytes=128", row.where)
        self.assertNotIn("below 1", row.where)

    def test_cells_below_one_are_named_and_a_cell_without_runs_is_left_out(self):
        measured = results_of([])
        measured.runs = [self.run_of("corio-uring", 1, 90), self.run_of("c-uring", 1, 100)]
        row = echo._same_round(measured, "requests_per_sec", "corio-uring", "c-uring", [(50, 128), (300, 128)])
        self.assertAlmostEqual(row.ratio, 0.9)
        self.assertIn("1 cells; lowest clients=50 bytes=128; below 1 in 1: c=50 b=128 0.900x", row.where)


class EchoMissesSayWhetherTheRunsOverlap(unittest.TestCase):
    """A missed echo cell is judged on medians; the target's line also counts the misses where the two rows'
    min-max ranges overlap (the host's run-to-run spread covers the gap) apart from those where they do not."""

    @staticmethod
    def row(server: str, clients: int, median: float, low: float, high: float) -> Aggregate:
        made = Aggregate({"server": server, "clients": str(clients), "bytes": "128",
                          "requests_per_sec": str(median)})
        made.low["requests_per_sec"], made.high["requests_per_sec"] = low, high
        return made

    def test_overlapping_and_separate_misses_are_counted_apart(self):
        measured = Results([self.row("corio-epoll", 50, 90, 80, 110), self.row("c-epoll", 50, 100, 95, 105),
                            self.row("corio-epoll", 300, 80, 78, 82), self.row("c-epoll", 300, 100, 90, 110),
                            self.row("corio-epoll", 500, 100, 99, 101), self.row("c-epoll", 500, 100, 99, 101)],
                           {"mode": "full"})
        pairs = echo._pairs(measured, "requests_per_sec", "corio-epoll", lambda c, b: ["c-epoll"])
        found = echo._across("corio-epoll req/s / c-epoll's", [(50, 128), (300, 128), (500, 128)], pairs, 0.95,
                             higher=True)
        self.assertFalse(found.passed)
        self.assertIn("missed in 2: c=50 b=128 0.90x, c=300 b=128 0.80x", found.where)
        self.assertIn("(1 of 2 within the two rows' overlapping min-max ranges)", found.where)

    def test_a_met_target_says_nothing_of_ranges(self):
        measured = Results([self.row("corio-epoll", 50, 100, 90, 110), self.row("c-epoll", 50, 100, 90, 110)],
                           {"mode": "full"})
        pairs = echo._pairs(measured, "requests_per_sec", "corio-epoll", lambda c, b: ["c-epoll"])
        found = echo._across("corio-epoll req/s / c-epoll's", [(50, 128)], pairs, 0.95, higher=True)
        self.assertTrue(found.passed)
        self.assertNotIn("min-max", found.where)


class PublishedResults(unittest.TestCase):
    COLUMNS = ["impl", "size", "speed"]

    def save(self, directory: Path, name: str, speeds: list[str]) -> None:
        runs = [{"impl": "a", "size": "1", "speed": speed, "rep": str(rep)} for rep, speed in enumerate(speeds)]
        rows = results.aggregate(runs, self.COLUMNS, ["impl", "size"], ["speed"])
        results.save(directory, name, self.COLUMNS, runs, rows, "full", len(speeds), 0.5, [], "abc", {})

    def test_a_run_of_one_experiment_replaces_its_published_results_and_keeps_the_others(self):
        with tempfile.TemporaryDirectory() as scratch:
            local, published = Path(scratch) / "results", Path(scratch) / "docs" / "data"
            self.save(local, "one", ["1", "2", "3"])
            self.save(local, "two", ["10", "20", "30"])
            results.publish(local, published, "one")
            results.publish(local, published, "two")
            self.save(local, "one", ["4", "5", "6"])
            results.publish(local, published, "one")
            one = results.load(published, "one", ["impl", "size"], ["speed"])
            two = results.load(published, "two", ["impl", "size"], ["speed"])
            self.assertEqual((one.rows[0].median("speed"), one.rows[0].low["speed"]), (5.0, 4.0))
            self.assertEqual((two.rows[0].median("speed"), two.rows[0].high["speed"]), (20.0, 30.0))
            self.assertTrue(one.meta["cpu"] and one.meta["kernel"], "the meta names the machine")

    def test_publishing_where_runs_were_kept_lost_replaces_the_stale_copy(self):
        with tempfile.TemporaryDirectory() as scratch:
            local, published = Path(scratch) / "results", Path(scratch) / "data"
            self.save(local, "one", ["1", "2", "3"])
            results.publish(local, published, "one")
            (local / "one-runs.csv").unlink()
            results.publish(local, published, "one")
            self.assertFalse((published / "one-runs.csv").exists(), "an older run's samples were kept")

    def test_publishing_into_the_same_directory_keeps_the_files(self):
        with tempfile.TemporaryDirectory() as scratch:
            local = Path(scratch)
            self.save(local, "one", ["1", "2", "3"])
            results.publish(local, local, "one")
            self.assertIsNotNone(results.load(local, "one", ["impl", "size"], ["speed"]))


class RunTimeout(unittest.TestCase):
    def test_a_run_that_times_out_is_stopped_with_what_it_started(self):
        with tempfile.TemporaryDirectory() as scratch:
            pid_file = Path(scratch) / "child.pid"
            script = f"sleep 300 & echo $! > {pid_file}; sleep 300; echo 1"
            with self.assertRaisesRegex(ValueError, "timed out"):
                _run_once(Cell("hangs", ["sh", "-c", script]), ["a"], 1)
            child = int(pid_file.read_text())
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and running(child):
            time.sleep(0.05)
        self.assertFalse(running(child), "the timed-out run's child is still running")

    def test_a_failing_run_reports_its_status_and_stderr(self):
        with self.assertRaisesRegex(ValueError, "exit 3: bad"):
            _run_once(Cell("fails", ["sh", "-c", "echo bad >&2; exit 3"]), ["a"], 5)


if __name__ == "__main__":
    unittest.main()
