"""Generated Tic-Tac-Toe opponents: families of players drawn at random (issue 15).

A family (``opponents.ttt_families`` in params.yaml) is a seeded draw of ``count``
players, named ``<family>-<i>`` for i = 0 .. count-1, all of one ``kind``:

- ``pattern``: plays the first empty cell of its own order of the nine cells, a
  uniformly random permutation (the paper's six pattern players are six such
  orders; a family has up to 9! = 362,880 others);
- ``mcts``: UCT + MCTS-Solver (``opponents.mcts_uct_c``, ``opponents.mcts_solver``)
  with its own simulation budget, log-uniform over ``simulations`` = [low, high]
  and rounded to an integer.

Each member then plays a uniformly random legal move instead with its own
probability ``noise``, uniform over ``noise`` = [low, high] and rounded to three
decimals (``NoisyPlayer``; [0, 0], the default, keeps every member pure). Member i
is drawn from its own stream ``numpy.random.default_rng([seed, i])``: it does not
depend on the family's size, and families with other seeds share no stream. A
population entry or an ``evaluation.ood`` suite naming a family stands for all its
members, the weight split evenly (as for Kuhn families).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from mage_core.envs.base import GameState, check_generator
from mage_core.opponents.families import check_index, count_and_seed_problems, member_name

KINDS = ("pattern", "mcts")


@dataclass(frozen=True)
class TicTacToeFamily:
    """How a family is drawn (the fields of ``opponents.ttt_families.<name>``)."""

    count: int
    seed: int = 0
    kind: Literal["pattern", "mcts"] = "pattern"
    simulations: tuple[int, int] = (10, 1000)
    noise: tuple[float, float] = (0.0, 0.0)

    def __post_init__(self) -> None:
        problems = count_and_seed_problems(self.count, self.seed)
        if self.kind not in KINDS:
            problems.append(f"kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        low, high = self.simulations
        if not (isinstance(low, int) and isinstance(high, int) and 2 <= low <= high):
            problems.append(f"simulations must be [low, high] with 2 <= low <= high (MCTS needs 2), "
                            f"got {list(self.simulations)!r}")
        low_p, high_p = self.noise
        if not 0 <= low_p <= high_p <= 1:
            problems.append(f"noise must be [low, high] with 0 <= low <= high <= 1, got {list(self.noise)!r}")
        if problems:
            raise ValueError("; ".join(problems))


def member(family: TicTacToeFamily, index: int) -> dict[str, Any]:
    """Member ``index``: ``{"kind", "order" (pattern) or "simulations" (mcts), "noise"}``."""
    check_index(family.count, index)
    rng = np.random.default_rng([family.seed, index])
    spec: dict[str, Any] = {"kind": family.kind}
    if family.kind == "pattern":
        spec["order"] = tuple(int(cell) for cell in rng.permutation(9))
    else:
        low, high = family.simulations
        spec["simulations"] = int(round(math.exp(rng.uniform(math.log(low), math.log(high)))))
    spec["noise"] = round(float(rng.uniform(*family.noise)), 3)
    return spec


def members(name: str, family: TicTacToeFamily) -> dict[str, dict[str, Any]]:
    """Every member of the family ``name``: ``{"<name>-<i>": spec}``, in index order."""
    return {member_name(name, i): member(family, i) for i in range(family.count)}


class NoisyPlayer:
    """``inner``'s move, except that with probability ``noise`` a uniformly random
    legal move (one draw of ``rng`` decides; noise 0 never draws, so the inner
    player's stream is untouched)."""

    def __init__(self, name: str, inner: Any, noise: float) -> None:
        if not 0 <= noise <= 1:
            raise ValueError(f"NoisyPlayer {name!r}: noise must lie in [0, 1], got {noise!r}")
        self.name = name
        self.inner = inner
        self.noise = float(noise)

    def act(self, state: GameState, rng: np.random.Generator) -> int:
        check_generator(rng, f"NoisyPlayer({self.name!r}).act")
        if self.noise > 0 and rng.random() < self.noise:
            moves = state.legal_moves()
            return int(moves[rng.integers(len(moves))])
        return int(self.inner.act(state, rng))

    def __repr__(self) -> str:
        return f"NoisyPlayer(name={self.name!r}, noise={self.noise}, inner={self.inner!r})"
