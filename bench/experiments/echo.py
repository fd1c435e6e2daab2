"""Experiment `echo`: a TCP echo server under a real load client, 1-500 clients, 128-1000 bytes
(bench/scenarios.md)."""

import os
import statistics
import sys
from pathlib import Path

from labkit import charts
from labkit.context import Context
from labkit.report import markdown_table, spread
from labkit.results import Results
from labkit.runner import Cell
from labkit.targets import Target, at_least, at_most, context, shown

NAME = "echo"
TITLE = "TCP echo server, 1-500 clients"
SUMMARY = ("Each server runs on one thread pinned to CPU 0; the load client (bench/loadgen, plain C, one epoll "
           "loop pinned to CPU 1) keeps every connection busy with one request of L bytes at a time, for D seconds. "
           "Requests per second (higher is better) and the server's CPU microseconds per request, user + system "
           "(lower is better; it shows a server's cost even where the client is the bottleneck). Zero client errors "
           "(a stalled connection included) in every run. At 1 client, where corio's worker spins up to 50 µs before "
           "it sleeps, c-epoll also runs busy-polling for 50 µs before it blocks (`c-epoll-spin`), and corio-uring's "
           "target against c-epoll takes the faster of the two.")
COLUMNS = ["server", "clients", "bytes", "seconds", "requests_per_sec", "errors", "server_user_s", "server_sys_s",
           "server_cpu_us_per_req"]
KEY = ["server", "clients", "bytes"]
METRICS = ["seconds", "requests_per_sec", "errors", "server_user_s", "server_sys_s", "server_cpu_us_per_req"]
BUILDS = {"cpp", "go", "rust"}
REPS = 3  # runs per cell, as issue 8 specifies (the lab's default of 5 would take 45 minutes)

SERVERS = ["corio-uring", "corio-uring-timeout", "corio-uring-multishot", "corio-epoll",
           "c-uring", "c-epoll", "c-epoll-spin", "go", "tokio", "asio"]
PEERS = ["c-uring", "c-epoll", "go", "tokio", "asio"]  # what corio-uring must match or beat
CORIO_BINARY = "corio_echo_server"
CLIENTS = [1, 50, 150, 300, 500]
BYTES = [128, 512, 1000]
QUICK_CELLS = [(1, 128), (50, 512), (500, 1000)]  # 1 and 500 clients, and every size, once
# The same corio server with a 30 s read deadline re-armed on every read, against corio-uring in the same
# run (issue 8: timers that scale to connections); only at 300 clients, or at one cell in QUICK mode.
TIMEOUT_SERVER = "corio-uring-timeout"
# The same corio server with reads from a multishot recv into provided buffers (CORIO_URING_MULTISHOT=all)
# instead of the default single-shot recvs on the registered file: the choice of default, shown in the run.
MULTISHOT_SERVER = "corio-uring-multishot"
VARIANTS = [TIMEOUT_SERVER, MULTISHOT_SERVER]  # each runs at the variant cells only, beside corio-uring
VARIANT_CELLS = [(300, size) for size in BYTES]
VARIANT_CELLS_QUICK = [(300, 512)]
# c-epoll busy-polling (epoll_wait timeout 0) for up to 50 us before it blocks, as corio's worker spins up to 50 us
# in its reactor before it sleeps: c-epoll's other configuration (bench/scenarios.md, opening rules). Only at
# 1 client, where a server would otherwise sleep between requests; corio-uring's req/s target against c-epoll
# takes the faster of the two there.
SPIN_SERVER = "c-epoll-spin"
SPIN_OF = {"c-epoll": SPIN_SERVER}  # a peer -> its busy-polling twin, where it has one
SPIN_US = 50
SPIN_CLIENTS = 1
TIMEOUT_LIMIT = 0.95  # its req/s within 5% of corio-uring's
SECONDS_FULL, SECONDS_QUICK = 5.0, 1.0
SECONDS_ENV = "ECHO_SECONDS"  # shorter windows for a faster full run (bench/scenarios.md, "Duration")
OVERHEAD_S = 0.15  # per run beyond its window: start, probe, connect, stop (0.05-0.15 s on the lab's VM)
CPU_FROM_CLIENTS = 50  # the CPU-per-request targets start here (below, every server mostly waits)
LOADGEN = Path(__file__).resolve().parents[1] / "loadgen"


def _servers(ctx: Context) -> dict[str, list[str]]:
    """Each row's command line; echo_cell.py puts the port where `{port}` is."""
    corio = [ctx.cpp_binary(CORIO_BINARY), "--port", "{port}", "--threads", "1", "--backend"]
    return {
        "corio-uring": corio + ["io_uring"],
        TIMEOUT_SERVER: corio + ["io_uring", "--read-timeout", "30"],
        MULTISHOT_SERVER: ["env", "CORIO_URING_MULTISHOT=all"] + corio + ["io_uring"],  # env execs: same PID
        "corio-epoll": corio + ["epoll"],
        "c-uring": [ctx.cpp_binary("c_uring_server"), "--port", "{port}"],
        "c-epoll": [ctx.cpp_binary("c_epoll_server"), "--port", "{port}"],
        SPIN_SERVER: [ctx.cpp_binary("c_epoll_server"), "--port", "{port}", "--spin-us", str(SPIN_US)],
        "go": [ctx.go_binary("echo"), "--port", "{port}"],
        "tokio": [ctx.rust_binary("echo"), "--port", "{port}"],
        "asio": [ctx.cpp_binary("asio_server"), "--port", "{port}"],
    }


def _seconds(ctx: Context) -> float:
    if ctx.quick:
        return SECONDS_QUICK
    raw = os.environ.get(SECONDS_ENV)
    if not raw:
        return SECONDS_FULL
    seconds = float(raw)
    if not 0 < seconds <= 60:
        raise ValueError(f"{SECONDS_ENV}={raw}: wants seconds in (0, 60]")
    return seconds


def settings(ctx: Context) -> dict:
    """What the report states beside the run's mode: the window, which ECHO_SECONDS may change."""
    return {"seconds per run": f"{_seconds(ctx):g}"}


class Schedule:
    """Which cells run, in a full or a quick run: the main matrix (every main row), the variants' cells
    (where corio-uring runs too, their yardstick) and the spin row's cells (the matrix's 1-client cells)."""

    def __init__(self, quick: bool):
        self.matrix = QUICK_CELLS if quick else [(clients, size) for size in BYTES for clients in CLIENTS]
        self.variant_cells = VARIANT_CELLS_QUICK if quick else VARIANT_CELLS
        self.spin_cells = [cell for cell in self.matrix if cell[0] == SPIN_CLIENTS]

    def cells(self) -> list[tuple[int, int]]:
        return self.matrix + [cell for cell in self.variant_cells if cell not in self.matrix]

    def runs_at(self, name: str, cell: tuple[int, int]) -> bool:
        if name in VARIANTS:
            return cell in self.variant_cells
        if name == SPIN_SERVER:
            return cell in self.spin_cells
        return cell in self.matrix or name == "corio-uring"


def cells(ctx: Context) -> list[Cell]:
    servers = _servers(ctx)
    if not Path(servers["corio-uring"][0]).exists():
        # bench/cpp/echo skips corio_echo_server until examples/echo_server.cpp and corio/net/ exist.
        print(f"[echo] corio-uring, corio-epoll: unavailable (no {CORIO_BINARY}: examples/echo_server.cpp or the "
              "installed corio's corio/net/ is missing); running the other rows", file=sys.stderr, flush=True)
        servers = {name: argv for name, argv in servers.items() if not name.startswith("corio-")}
    seconds = _seconds(ctx)
    schedule = Schedule(ctx.quick)
    made = []
    for clients, size in schedule.cells():
        for name, server in servers.items():
            if not schedule.runs_at(name, (clients, size)):
                continue
            argv = [sys.executable, str(LOADGEN / "echo_cell.py"), "--name", name, "--client",
                    ctx.cpp_binary("echo_load"), "--clients", str(clients), "--bytes", str(size),
                    "--seconds", f"{seconds:g}", "--"] + server
            made.append(Cell(f"{name} clients={clients} bytes={size}", argv))
    expected = len(made) * ctx.reps * (seconds + OVERHEAD_S)
    print(f"[echo] {len(made)} cells x {ctx.reps} runs of {seconds:g} s: about {int(expected // 60)}m"
          f"{int(expected % 60):02d}s", file=sys.stderr, flush=True)
    return made


def _sorted(results: Results, column: str) -> list[str]:
    return sorted(results.distinct(column), key=int)


def _of_bytes(results: Results, size: str) -> Results:
    return Results([row for row in results.rows if row.values["bytes"] == size], results.meta)


def _metric_table(results: Results, metric: str, digits: int, scale: float) -> str:
    clients = _sorted(results, "clients")
    rows = []
    for size in _sorted(results, "bytes"):
        for server in SERVERS:
            found = [results.find(server=server, clients=c, bytes=size) for c in clients]
            if any(found):
                rows.append([f"`{server}`", size] + [spread(row, metric, digits, scale) for row in found])
    return markdown_table(["server", "bytes"] + [f"clients={c}" for c in clients], rows)


def table(results: Results) -> str:
    text = ("Requests per second, thousands:\n\n" + _metric_table(results, "requests_per_sec", 1, 1e-3)
            + "\n\nServer CPU microseconds per request (user + system):\n\n"
            + _metric_table(results, "server_cpu_us_per_req", 2, 1.0))
    if not any(server.startswith("corio-") for server in results.distinct("server")):
        text += ("\n\n**The corio rows are unavailable**: `corio_echo_server` was not built, because "
                 "`examples/echo_server.cpp` or the installed corio's `corio/net/` headers are missing.")
    return text


def chart(results: Results, path) -> None:
    sizes = _sorted(results, "bytes")
    clients = _sorted(results, "clients")
    series = [server for server in SERVERS if server in results.distinct("server") and server not in VARIANTS]
    fig, axes = charts.figure(2 * len(sizes), "echo: requests per second (top, higher is better) and server CPU per "
                              "request (bottom, lower is better); median, min-max", columns=len(sizes))
    for column, size in enumerate(sizes):
        of_size = _of_bytes(results, size)
        top, bottom = axes[column], axes[len(sizes) + column]
        charts.lines(top, of_size, "requests_per_sec", series, clients, "clients", "clients", "requests / s",
                     log=False, series_column="server")
        top.set_title(f"{size} bytes")
        charts.lines(bottom, of_size, "server_cpu_us_per_req", series, clients, "clients", "clients",
                     "server CPU µs / request", log=False, series_column="server")
        for ax in (top, bottom):  # after drawing: set_ylim stops autoscaling, which left an empty panel at 0-1
            ax.set_ylim(bottom=0)  # from zero, so ratios between servers read off the heights
    charts.save(fig, path)


def _schedule_of(results: Results) -> Schedule:
    """The schedule the results were measured on: quick or full, from the run's metadata (without it, quick
    if every row is at a cell a quick run schedules)."""
    mode = results.meta.get("mode")
    if mode in ("quick", "full"):
        return Schedule(mode == "quick")
    present = {(int(row.values["clients"]), int(row.values["bytes"])) for row in results.rows}
    return Schedule(present <= set(Schedule(True).cells()))


def _pairs(results: Results, metric: str, numerator: str, rivals_at):
    """(numerator's median, the rival's, the rival's name if it was picked among several, whether the two rows'
    min-max ranges over their runs overlap) at a cell, where `rivals_at(clients, size)` names the rows to compare
    with and the one with the highest median is taken (the faster configuration, for requests/s); (None, None,
    which rows are missing, False) if any is missing."""
    def pairs(clients: int, size: int):
        rivals = rivals_at(clients, size)
        rows = {name: results.find(server=name, clients=clients, bytes=size) for name in [numerator] + rivals}
        absent = [name for name, row in rows.items() if row is None]
        if absent:
            return None, None, "no " + ", ".join(absent), False
        rival = max(rivals, key=lambda name: rows[name].median(metric))
        ours, theirs = rows[numerator], rows[rival]
        overlap = ours.low[metric] <= theirs.high[metric] and theirs.low[metric] <= ours.high[metric]
        return ours.median(metric), theirs.median(metric), rival if len(rivals) > 1 else "", overlap
    return pairs


def _same_round(results: Results, metric: str, numerator: str, denominator: str, cells: list[tuple[int, int]]):
    """A context row: at each cell, the median over the rounds of numerator / denominator measured in the same
    round (same `rep`: a cell's servers run back to back within a round), so a phase of the host that spans a
    round's neighbouring runs weighs on both. The lowest cell's median is the row's ratio; the cells below 1
    are named."""
    by_run = {(run["server"], int(run["clients"]), int(run["bytes"]), run["rep"]): float(run[metric])
              for run in results.runs}
    medians = []
    for clients, size in cells:
        ratios = [value / by_run[(denominator, clients, size, rep)]
                  for (server, c, b, rep), value in by_run.items()
                  if server == numerator and (c, b) == (clients, size)
                  and by_run.get((denominator, clients, size, rep), 0) > 0]
        if ratios:
            medians.append((statistics.median(ratios), clients, size))
    claim = f"{numerator} req/s / {denominator}'s, median of same-round ratios"
    if not medians:
        return context(claim, "no runs", None, None)
    ratio, clients, size = min(medians)
    below = [f"c={c} b={b} {r:.3f}x" for r, c, b in medians if r < 1]
    where = f"{len(medians)} cells; lowest clients={clients} bytes={size}"
    if below:
        where += f"; below 1 in {len(below)}: " + _listed(below)
    return context(claim, where, ratio, 1.0)


def _listed(items: list[str], shown: int = 6) -> str:
    return ", ".join(items[:shown]) + (f", and {len(items) - shown} more" if len(items) > shown else "")


def _across(claim: str, cells: list[tuple[int, int]], pairs, limit: float, higher: bool) -> Target:
    """One target over the cells the run scheduled for it: the worst cell's ratio decides, and every cell that
    misses is named. A cell without data (a row failed or did not run) is a miss: then the target has no
    ratio ("no data", as a missing row is for every other experiment), and its line names those cells."""
    need = f"{'>=' if higher else '<='} {limit:g}x"
    if not cells:
        return Target(claim, "no cells", None, need, False, limit=limit)
    ratios, absent = [], []
    for clients, size in cells:
        numerator, denominator, note, overlap = pairs(clients, size)
        if numerator is None or denominator is None or denominator <= 0:
            absent.append(f"c={clients} b={size} ({note or 'no data'})")
            continue
        ratios.append((numerator / denominator, clients, size, numerator, denominator, note, overlap))
    misses = [(c, b, r, note, overlap) for r, c, b, _, _, note, overlap in ratios if (r < limit if higher else r > limit)]
    missed = [f"c={c} b={b} {shown(r, limit)}" + (f" vs {note}" if note else "") for c, b, r, note, _ in misses]
    within_spread = sum(overlap for *_, overlap in misses)
    if absent:
        where = f"{len(cells)} cells; no data in {len(absent)}: " + _listed(absent)
        if missed:
            where += f"; of the rest, missed in {len(missed)}: " + _listed(missed)
        return Target(claim, where, None, need, False, limit=limit)
    ratio, clients, size, numerator, denominator, note, _ = (min if higher else max)(ratios)
    where = f"{len(cells)} cells; worst clients={clients} bytes={size}" + (f" (vs {note})" if note else "")
    if missed:
        where += f"; missed in {len(missed)}: " + ", ".join(missed)
        where += f" ({within_spread} of {len(missed)} within the two rows' overlapping min-max ranges)"
    check = at_least if higher else at_most
    return check(claim, where, numerator, denominator, limit)


def targets(results: Results) -> list:
    # Every comparison is judged on the cells the run scheduled for both of its rows, whatever rows are present:
    # a cell that failed is a "no data" miss, and corio-uring's extra cells beside the variants are not judged
    # against rows that never run there.
    schedule = _schedule_of(results)
    cells = schedule.matrix
    busy = [(c, b) for c, b in cells if c >= CPU_FROM_CLIENTS]
    spun = set(schedule.spin_cells)

    def only(name):
        return lambda c, b: [name]

    def faster_of(peer):  # the peer, or at the spin cells the faster of it and its busy-polling twin
        twin = SPIN_OF.get(peer)
        return lambda c, b: [peer, twin] if twin and (c, b) in spun else [peer]

    found = []
    for peer in PEERS:
        twin = SPIN_OF.get(peer)
        where_twin = f" (at {SPIN_CLIENTS} client: the faster of {peer}, {twin})" if twin else ""
        found.append(_across(f"corio-uring req/s / {peer}'s{where_twin}", cells,
                             _pairs(results, "requests_per_sec", "corio-uring", faster_of(peer)), 1, higher=True))
    if busy:
        found += [_across(f"corio-uring CPU/request / {peer}'s", busy,
                          _pairs(results, "server_cpu_us_per_req", "corio-uring", only(peer)), 1, higher=False)
                  for peer in PEERS]
    # Against plain c-epoll in every cell, c-epoll-spin aside (bench/scenarios.md, echo Targets).
    found.append(_across("corio-epoll req/s / c-epoll's", cells,
                         _pairs(results, "requests_per_sec", "corio-epoll", only("c-epoll")), 0.95, higher=True))
    found.append(_across(f"{TIMEOUT_SERVER} req/s / corio-uring's (30 s read timeout re-armed per read)",
                         schedule.variant_cells,
                         _pairs(results, "requests_per_sec", TIMEOUT_SERVER, only("corio-uring")), TIMEOUT_LIMIT,
                         higher=True))
    # Context, not scored: the same comparisons run by run, against the host's phases (bench/scenarios.md).
    found += [_same_round(results, "requests_per_sec", "corio-uring", peer, busy) for peer in PEERS]
    found.append(_same_round(results, "requests_per_sec", "corio-epoll", "c-epoll", busy))
    return found
