"""Performance targets checked against the ratios measured in a run (DESIGN.md, performance budget).

A target compares two measured medians; nothing here holds a measured figure.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    claim: str  # e.g. "corio switch <= 3x cxx20-bare"
    where: str  # e.g. "N=1000"
    ratio: float | None  # measured, None when a row is missing
    need: str  # e.g. "<= 3x"
    passed: bool
    scored: bool = True  # False for a ratio the report shows for context only (no verdict, not counted)
    limit: float | None = None  # the bound `need` states, for shown()


def at_most(claim: str, where: str, numerator: float | None, denominator: float | None, limit: float) -> Target:
    """PASS when numerator / denominator <= limit."""
    ratio = _ratio(numerator, denominator)
    return Target(claim, where, ratio, f"<= {limit:g}x", ratio is not None and ratio <= limit, limit=limit)


def at_least(claim: str, where: str, numerator: float | None, denominator: float | None, limit: float) -> Target:
    """PASS when numerator / denominator >= limit."""
    ratio = _ratio(numerator, denominator)
    return Target(claim, where, ratio, f">= {limit:g}x", ratio is not None and ratio >= limit, limit=limit)


def context(claim: str, where: str, numerator: float | None, denominator: float | None) -> Target:
    """A ratio shown next to the targets for context (e.g. against a floor that nothing must reach)."""
    return Target(claim, where, _ratio(numerator, denominator), "–", True, scored=False)


def shown(ratio: float, limit: float | None) -> str:
    """A ratio as the report prints it: two decimals, or as many more as it takes not to print a ratio that
    misses (or meets) its limit as the limit itself (0.9492 against >= 0.95 reads "0.949x", not a "0.95x"
    marked as missed)."""
    digits = 2
    while limit is not None and ratio != limit and digits < 6 and float(f"{ratio:.{digits}f}") == limit:
        digits += 1
    return f"{ratio:.{digits}f}x"


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or denominator is None or denominator <= 0:
        return None
    return numerator / denominator
