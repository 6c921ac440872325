"""The uniform-random player, for any game."""

from __future__ import annotations

import numpy as np

from mage_core.envs.base import GameState


class UniformRandom:
    """Picks a legal move uniformly at random."""

    def __init__(self, name: str = "random") -> None:
        self.name = name

    def act(self, state: GameState, rng: np.random.Generator) -> int:
        moves = state.legal_moves()
        return int(moves[rng.integers(len(moves))])
