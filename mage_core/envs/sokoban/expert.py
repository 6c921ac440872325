"""Sokoban's expert: the next moves of an optimal solution from the current position."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from mage_core.envs.base import Revealed
from mage_core.envs.sokoban.env import SokobanEnv
from mage_core.envs.sokoban.solver import solve


def act(env: SokobanEnv, rng: np.random.Generator, memory: Sequence[Revealed] = ()) -> str | None:
    """The first ``moves_per_turn`` moves of a fewest-moves solution of the position (``solve``,
    breadth-first); None when none is left (a box pushed where it can never leave, after a
    detour: ``play_expert`` then steps at random, as a detour). The memory of earlier
    attempts is not read: the solver needs none."""
    plan = solve(env.level)
    return ", ".join(plan[: env.settings.moves_per_turn]) if plan else None
