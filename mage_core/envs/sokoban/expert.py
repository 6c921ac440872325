"""Sokoban's expert: the next moves of an optimal solution from the current position."""

from __future__ import annotations

import numpy as np

from mage_core.envs.sokoban.env import SokobanEnv
from mage_core.envs.sokoban.solver import solve


def act(env: SokobanEnv, rng: np.random.Generator) -> str:
    """The first ``moves_per_turn`` moves of a fewest-moves solution of the position
    (``solve``, breadth-first); a uniformly drawn legal action when none is left (a box
    pushed where it can never leave, after a detour)."""
    plan = solve(env.level)
    if not plan:
        legal = env.legal_actions()
        return legal[int(rng.integers(len(legal)))]
    return ", ".join(plan[: env.settings.moves_per_turn])
