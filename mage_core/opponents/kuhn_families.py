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

The ``styles`` prior (issue 29) draws mixtures of named playing styles instead:
member i picks two distinct styles of ``styles`` (built-in behaviour strategies:
``kuhn.STYLES``, the probe pair, the archetypes) and a weight w ~ U(0, 1), and bets
with w * P_a(BET) + (1 - w) * P_b(BET) at every information set, rounded to 1/grid:
players between the corners of the strategy space, each still one consistent style.
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
PRIORS = ("beta", "styles")
#: The styles the ``styles`` prior mixes unless a family names its own (the ``diverse`` prior:
#: no paper archetype among them, so that those stay held out).
DIVERSE_STYLES = ("maniac", "station", "polar_bluffer", "trapper", "tight_caller", "calling_station")


def style_table(name: str) -> tuple[Fraction, ...]:
    """A built-in style's 12 probabilities (``ALL_INFOSETS`` order)."""
    from mage_core.opponents.kuhn import ARCHETYPES, PROBES, STYLES

    known = {**STYLES, **PROBES, **ARCHETYPES}
    if name not in known:
        raise ValueError(f"unknown style {name!r}; styles: {', '.join(known)}")
    return tuple(known[name].p_bet[key] for key in ALL_INFOSETS)


@dataclass(frozen=True)
class KuhnFamily:
    """How a family is drawn (the fields of ``opponents.kuhn_families.<name>``)."""

    count: int
    seed: int = 0
    prior: Literal["beta", "styles"] = "beta"
    alpha: float = 1.0
    beta: float = 1.0
    grid: int = 100
    styles: tuple[str, ...] = DIVERSE_STYLES

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
        if self.prior == "styles":
            if len(set(self.styles)) < 2 or len(set(self.styles)) != len(self.styles):
                problems.append(f"styles must name at least two distinct styles, got {list(self.styles)}")
            for name in self.styles:
                try:
                    style_table(name)
                except ValueError as err:
                    problems.append(str(err))
        if problems:
            raise ValueError("; ".join(problems))


def member(family: KuhnFamily, index: int) -> dict[str, Fraction]:
    """P(BET) per information set of member ``index`` (exact fractions on the grid)."""
    check_index(family.count, index)
    if family.prior == "styles":
        return dict(zip(ALL_INFOSETS, _mix(family.seed, index, family.styles, family.grid)))
    return dict(zip(ALL_INFOSETS, _draw(family.seed, index, family.alpha, family.beta, family.grid)))


@functools.lru_cache(maxsize=1 << 14)
def _mix(seed: int, index: int, styles: tuple[str, ...], grid: int) -> tuple[Fraction, ...]:
    """One member of a ``styles`` family: two distinct styles and the weight of the first."""
    rng = np.random.default_rng([seed, index])
    a, b = (int(i) for i in rng.choice(len(styles), size=2, replace=False))
    w = Fraction(int(round(float(rng.uniform()) * grid)), grid)
    return tuple(Fraction(round((w * pa + (1 - w) * pb) * grid), grid)
                 for pa, pb in zip(style_table(styles[a]), style_table(styles[b])))


@functools.lru_cache(maxsize=1 << 14)
def _draw(seed: int, index: int, alpha: float, beta: float, grid: int) -> tuple[Fraction, ...]:
    """One member's 12 probabilities (cached: every stage reads the opponents' settings more than once)."""
    draws = np.random.default_rng([seed, index]).beta(alpha, beta, size=len(ALL_INFOSETS))
    return tuple(Fraction(int(round(float(p) * grid)), grid) for p in draws)


def prior_draw(family: KuhnFamily, index: int) -> dict[str, Fraction]:
    """Draw ``index`` from the family's prior itself: not rounded to the grid (only
    to six digits, to stay an exact fraction) and from a stream no member uses.
    For Monte Carlo estimates over the continuous prior, never an opponent."""
    if family.prior == "styles":
        raise NotImplementedError("prior_draw: a styles family's prior is its members' mixture rule; draw "
                                  "members (member) instead")
    draws = np.random.default_rng([family.seed, 1 << 30, index]).beta(family.alpha, family.beta,
                                                                        size=len(ALL_INFOSETS))
    return {key: Fraction(float(p)).limit_denominator(10**6) for key, p in zip(ALL_INFOSETS, draws)}


def members(name: str, family: KuhnFamily) -> dict[str, dict[str, Fraction]]:
    """Every member of the family ``name``: ``{"<name>-<i>": P(BET) table}``, in index order."""
    return {member_name(name, i): member(family, i) for i in range(family.count)}
