"""The lab's experiments, in report order. Each is one module with the same hooks:

  NAME, TITLE, SUMMARY    identity and one paragraph for the report
  COLUMNS, KEY, METRICS   the CSV columns (bench/scenarios.md), those naming a cell, those measured
  BUILDS                  which sides it needs built: {"cpp", "go", "rust", "kotlin"}
  cells(ctx)              the runs to make: list of labkit.runner.Cell
  table(results)          markdown table for the report
  chart(results, path)    writes the PNG chart
  targets(results)        list of labkit.targets.Target computed from the results
  REPS (optional)         runs per cell when --reps is not given (echo: 3, as its issue specifies)

Adding an experiment (echo) is one more module here and one more entry below.
"""

from . import chan, coro, echo, post, spawn

EXPERIMENTS = [coro, post, spawn, chan, echo]
