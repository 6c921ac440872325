"""Confidence intervals for the rates and means the reports print."""

from __future__ import annotations

import math
from typing import Sequence

#: Two-sided 95% normal quantile.
Z95 = 1.959963984540054


def wilson_interval(successes: int, trials: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (good near 0 and 1)."""
    if trials <= 0:
        raise ValueError(f"trials must be positive, got {trials}")
    if not 0 <= successes <= trials:
        raise ValueError(f"successes must lie in [0, {trials}], got {successes}")
    p = successes / trials
    denom = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def mean_interval(values: Sequence[float], z: float = Z95) -> tuple[float, float, float]:
    """(mean, low, high): normal-approximation interval of the mean."""
    n = len(values)
    if n == 0:
        raise ValueError("mean_interval needs at least one value")
    mean = sum(values) / n
    if n == 1:
        return mean, mean, mean
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    half = z * math.sqrt(var / n)
    return mean, mean - half, mean + half


#: The smallest ceiling a figure is divided by (chips per hand; the exploitation ratio:
#: docs/method.md section 8's chip figure over a ceiling of section 11). Against an
#: equilibrium such as CFR's the best response earns only the strategy's residual
#: exploitability (~1e-4 chips seat-averaged), and a ratio to it would blow sampling
#: noise (a mean over 2,000 meta-episodes has a standard error of ~0.03 chips) up
#: into figures like -1,500. The weakest archetype
#: best response is 1/6 chips; 0.01 keeps every exploitable opponent and drops
#: (near-)equilibria.
MIN_RATIO_CEILING = 0.01


def ratio_to_ceiling(value: float | None, ceiling: float | None) -> float | None:
    """``value / ceiling`` where the ceiling is a meaningful positive value (at least
    ``MIN_RATIO_CEILING``); ``None`` otherwise (a missing value or ceiling, or a
    ceiling at or near 0, where the ratio would only magnify noise)."""
    if value is None or ceiling is None or math.isnan(value) or math.isnan(ceiling):
        return None
    return value / ceiling if ceiling >= MIN_RATIO_CEILING else None
