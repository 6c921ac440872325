"""MineSweeper's expert: reveal a closed cell least likely to hold a mine."""

from __future__ import annotations

import numpy as np

from mage_core.envs.minesweeper.board import mine_probabilities
from mage_core.envs.minesweeper.env import MineSweeperEnv, cell_text


def act(env: MineSweeperEnv, rng: np.random.Generator) -> str:
    """A closed cell of the lowest exact mine probability given what is open
    (``mine_probabilities``: every consistent placement equally likely), ties drawn
    uniformly. It reads only what the agent sees; it still loses when every closed
    cell may hold a mine (a guess)."""
    probabilities = mine_probabilities(env.board, env.settings.num_mines)
    lowest = min(probabilities.values())
    best = [cell for cell, p in probabilities.items() if p == lowest]  # row by row, as legal_actions
    return cell_text(best[int(rng.integers(len(best)))])
