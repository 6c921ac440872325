"""Generated Kuhn Poker opponents: families of behaviour strategies drawn from a prior (issue 15).

A family (``opponents.kuhn_families`` in params.yaml) is a seeded draw of
``count`` behaviour strategies, named ``<family>-<i>`` for i = 0 .. count-1. Member
i's P(BET) at each of the 12 information sets (``ALL_INFOSETS`` order) is an
independent draw from Beta(alpha, beta), rounded to a multiple of 1/grid, from its
own stream ``numpy.random.default_rng([seed, i])``: a member does not depend on the
family's size, and two families with other seeds share no stream. The rounding
keeps every probability an exact fraction, so the exact analysis
(``mage_core.envs.kuhn_poker.analysis``) applies to every member and to the family
as a finite prior (each member weighted 1/count).

Beta(1, 1) is uniform over [0, 1]; alpha = beta < 1 pushes players towards pure
choices (near-deterministic, easy to read once seen); large alpha = beta makes
them all close to the uniform random player.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

import numpy as np

from mage_core.envs.kuhn_poker.rules import ALL_INFOSETS
from mage_core.opponents.families import check_index, count_and_seed_problems, member_name

#: Priors a family may be drawn from.
PRIORS = ("beta",)


@dataclass(frozen=True)
class KuhnFamily:
    """How a family is drawn (the fields of ``opponents.kuhn_families.<name>``)."""

    count: int
    seed: int = 0
    prior: Literal["beta"] = "beta"
    alpha: float = 1.0
    beta: float = 1.0
    grid: int = 100

    def __post_init__(self) -> None:
        problems = count_and_seed_problems(self.count, self.seed)
        if self.prior not in PRIORS:
            problems.append(f"prior must be one of {', '.join(PRIORS)}, got {self.prior!r}")
        for key in ("alpha", "beta"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                problems.append(f"{key} must be a number > 0, got {value!r}")
        if isinstance(self.grid, bool) or not isinstance(self.grid, int) or self.grid < 1:
            problems.append(f"grid must be an int >= 1, got {self.grid!r}")
        if problems:
            raise ValueError("; ".join(problems))


def member(family: KuhnFamily, index: int) -> dict[str, Fraction]:
    """P(BET) per information set of member ``index`` (exact fractions on the grid)."""
    check_index(family.count, index)
    return dict(zip(ALL_INFOSETS, _draw(family.seed, index, family.alpha, family.beta, family.grid)))


@functools.lru_cache(maxsize=1 << 14)
def _draw(seed: int, index: int, alpha: float, beta: float, grid: int) -> tuple[Fraction, ...]:
    """One member's 12 probabilities (cached: every stage reads the opponents' settings more than once)."""
    draws = np.random.default_rng([seed, index]).beta(alpha, beta, size=len(ALL_INFOSETS))
    return tuple(Fraction(int(round(float(p) * grid)), grid) for p in draws)


def prior_draw(family: KuhnFamily, index: int) -> dict[str, Fraction]:
    """Draw ``index`` from the family's prior itself: not rounded to the grid (only
    to six digits, to stay an exact fraction) and from a stream no member uses.
    For Monte Carlo estimates over the continuous prior, never an opponent."""
    draws = np.random.default_rng([family.seed, 1 << 30, index]).beta(family.alpha, family.beta,
                                                                        size=len(ALL_INFOSETS))
    return {key: Fraction(float(p)).limit_denominator(10**6) for key, p in zip(ALL_INFOSETS, draws)}


def members(name: str, family: KuhnFamily) -> dict[str, dict[str, Fraction]]:
    """Every member of the family ``name``: ``{"<name>-<i>": P(BET) table}``, in index order."""
    return {member_name(name, i): member(family, i) for i in range(family.count)}
