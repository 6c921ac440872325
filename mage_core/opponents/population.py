"""Opponent populations: weighted (opponent, seat) draws per meta-episode.

Population-based training (docs/method.md section 7) samples ONE opponent and the
agent's seat for each meta-episode; the agent is never told which. Seats are
``first`` (the agent moves first), ``second``, or ``mixed`` (50/50 per draw).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Literal, Sequence

import numpy as np

from mage_core.envs.base import check_generator

Seat = Literal["first", "second", "mixed"]
SEATS: tuple[Seat, ...] = ("first", "second", "mixed")


@dataclass(frozen=True)
class PopulationEntry:
    opponent: str
    weight: float
    seat: Seat = "mixed"


@dataclass(frozen=True)
class Draw:
    """One meta-episode's opponent: its registry name and the agent's seat (0 or 1)."""

    opponent: str
    agent_seat: int


def _even(names: Sequence[str], total: Fraction) -> list[PopulationEntry]:
    share = total / len(names)
    return [PopulationEntry(n, float(share)) for n in names]


_TTT_WEAK = [
    "pattern-center_corners_edges",
    "pattern-corners",
    "pattern-edges",
    "pattern-diagonal",
    "pattern-anti_diagonal",
    "pattern-corners_bottom_right",
    "random",
]

#: Named populations (docs/method.md section 7). ``balanced`` is the paper's
#: Tic-Tac-Toe pool: half MCTS-100, half the six patterns and random.
PRESETS: dict[str, dict[str, list[PopulationEntry]]] = {
    "tic_tac_toe": {
        "balanced": [PopulationEntry("mcts-100", 0.5), *_even(_TTT_WEAK, Fraction(1, 2))],
        "pattern_skewed": [PopulationEntry("mcts-100", 0.2), *_even(_TTT_WEAK, Fraction(4, 5))],
        "fixed_mcts": [PopulationEntry("mcts-100", 1.0)],
        "held_out": [PopulationEntry("mcts-1000", 1.0)],
    },
    "kuhn_poker": {
        "paper": [
            PopulationEntry("conservative", 0.3),
            PopulationEntry("aggressive", 0.3),
            PopulationEntry("intermediate", 0.4),
        ],
        "uniform": _even(["conservative", "aggressive", "intermediate"], Fraction(1)),
        "fixed_intermediate": [PopulationEntry("intermediate", 1.0)],
        "held_out": [PopulationEntry("cfr", 1.0)],
        # The exploration suite (issue 15): opponents alike until they answer a bet,
        # the agent always first to act (as second it has nothing to probe with).
        "probe": [PopulationEntry("tight_caller", 0.5, "first"), PopulationEntry("calling_station", 0.5, "first")],
    },
}


def preset(game: str, name: str) -> list[PopulationEntry]:
    """A named population; ValueError lists the valid names."""
    if game not in PRESETS:
        raise ValueError(f"no population presets for {game!r}; games: {', '.join(PRESETS)}")
    if name not in PRESETS[game]:
        raise ValueError(f"unknown {game} population {name!r}; presets: {', '.join(PRESETS[game])}")
    return PRESETS[game][name]


class Population:
    """Weighted sampler over (opponent, seat); weights need not sum to 1."""

    def __init__(self, entries: Sequence[PopulationEntry]) -> None:
        if not entries:
            raise ValueError("a population needs at least one entry")
        for e in entries:
            if not e.weight > 0:
                raise ValueError(f"population weight of {e.opponent!r} must be > 0, got {e.weight}")
            if e.seat not in SEATS:
                raise ValueError(f"seat of {e.opponent!r} must be one of {', '.join(SEATS)}, got {e.seat!r}")
        self.entries = tuple(entries)
        weights = np.array([e.weight for e in entries], dtype=float)
        self._probs = weights / weights.sum()

    def probabilities(self) -> dict[tuple[str, int], float]:
        """Exact marginal probability of each (opponent, agent_seat) pair."""
        out: dict[tuple[str, int], float] = {}
        for e, p in zip(self.entries, self._probs):
            seats = {"first": [(0, 1.0)], "second": [(1, 1.0)], "mixed": [(0, 0.5), (1, 0.5)]}[e.seat]
            for seat, q in seats:
                out[(e.opponent, seat)] = out.get((e.opponent, seat), 0.0) + float(p) * q
        return out

    def sample(self, rng: np.random.Generator, size: int) -> list[Draw]:
        """``size`` independent draws; the same generator state gives the same list."""
        check_generator(rng, "Population.sample")
        idx = rng.choice(len(self.entries), size=size, p=self._probs)
        coins = rng.integers(0, 2, size=size)
        draws = []
        for i, coin in zip(idx, coins):
            e = self.entries[int(i)]
            seat = {"first": 0, "second": 1, "mixed": int(coin)}[e.seat]
            draws.append(Draw(e.opponent, seat))
        return draws
