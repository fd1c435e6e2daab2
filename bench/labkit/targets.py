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


def at_most(claim: str, where: str, numerator: float | None, denominator: float | None, limit: float) -> Target:
    """PASS when numerator / denominator <= limit."""
    ratio = _ratio(numerator, denominator)
    return Target(claim, where, ratio, f"<= {limit:g}x", ratio is not None and ratio <= limit)


def at_least(claim: str, where: str, numerator: float | None, denominator: float | None, limit: float) -> Target:
    """PASS when numerator / denominator >= limit."""
    ratio = _ratio(numerator, denominator)
    return Target(claim, where, ratio, f">= {limit:g}x", ratio is not None and ratio >= limit)


def context(claim: str, where: str, numerator: float | None, denominator: float | None) -> Target:
    """A ratio shown next to the targets for context (e.g. against a floor that nothing must reach)."""
    return Target(claim, where, _ratio(numerator, denominator), "–", True, scored=False)


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or denominator is None or denominator <= 0:
        return None
    return numerator / denominator
