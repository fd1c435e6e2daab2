"""Chart helpers shared by the experiments: grouped bars and lines with min-max error bars.

Uses matplotlib's Agg backend (files only, no display).
"""

from .results import Results


def _pyplot():
    """matplotlib.pyplot on the Agg backend, imported on first use (bench/lab.py checks it is there)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def figure(panels: int, title: str, columns: int | None = None):
    """A figure of `panels` charts, `columns` per row (default: all in one row); returns (fig, axes)."""
    columns = columns or panels
    rows = -(-panels // columns)
    fig, axes = _pyplot().subplots(rows, columns, figsize=(max(8.0, 5.2 * columns), 4.4 * rows), squeeze=False)
    fig.suptitle(title)
    return fig, [ax for row in axes for ax in row][:panels]


def _spread(results: Results, metric: str, cells: list[dict]) -> tuple[list[float], list[list[float]]]:
    medians, below, above = [], [], []
    for key in cells:
        row = results.find(**key)
        if row is None:
            medians.append(float("nan"))
            below.append(0.0)
            above.append(0.0)
            continue
        median = row.median(metric)
        medians.append(median)
        below.append(max(0.0, median - row.low[metric]))
        above.append(max(0.0, row.high[metric] - median))
    return medians, [below, above]


def grouped_bars(ax, results: Results, metric: str, series: list[str], groups: list[str], group_column: str,
                 group_labels: list[str], ylabel: str, log: bool, series_column: str = "impl") -> None:
    """One bar per value of `series_column` in `series` within each group (a value of `group_column`),
    median with min-max."""
    width = 0.8 / max(1, len(series))
    for index, impl in enumerate(series):
        cells = [{series_column: impl, group_column: group} for group in groups]
        medians, spread = _spread(results, metric, cells)
        positions = [g + (index - (len(series) - 1) / 2) * width for g in range(len(groups))]
        ax.bar(positions, medians, width, yerr=spread, capsize=2, label=impl)
    ax.set_xticks(range(len(groups)), group_labels)
    ax.set_ylabel(ylabel)
    _scale(ax, log)
    ax.grid(axis="y", which="both", alpha=0.3)


def lines(ax, results: Results, metric: str, series: list[str], xs: list[str], x_column: str, xlabel: str,
          ylabel: str, log: bool, series_column: str = "impl") -> None:
    """One line per value in `series` of `series_column` over the values `xs` of `x_column`, median with min-max."""
    for impl in series:
        cells = [{series_column: impl, x_column: x} for x in xs]
        medians, spread = _spread(results, metric, cells)
        ax.errorbar([float(x) for x in xs], medians, yerr=spread, marker="o", capsize=3, label=impl)
    ax.set_xticks([float(x) for x in xs], xs)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    _scale(ax, log)
    ax.grid(which="both", alpha=0.3)


def _scale(ax, log: bool) -> None:
    """Log or linear y axis, labelled in engineering units (2 k, 5 M); on a log axis the minor ticks
    at 2 and 5 are labelled too, so a range under two decades still reads."""
    from matplotlib.ticker import EngFormatter, FuncFormatter

    plain = EngFormatter(sep=" ")
    ax.yaxis.set_major_formatter(plain)
    if log:
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda value, _: plain(value) if _leading_digit(value) in (2, 5)
                                                   else ""))


def _leading_digit(value: float) -> int:
    return int(f"{value:e}"[0]) if value > 0 else 0


def save(fig, path) -> None:
    handles, labels = fig.axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(6, len(labels)), frameon=False)
    fig.tight_layout(rect=(0, 0.09, 1, 0.95))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    _pyplot().close(fig)
