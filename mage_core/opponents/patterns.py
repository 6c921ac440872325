"""Preferred-pattern Tic-Tac-Toe players (docs/method.md section 7).

Each plays the first empty cell of a fixed order of the nine cells. They are the
exploitable half of the training population: every one of them is a forced win
for a best-responding agent in either seat (docs/method.md section 11), but the agent
must first find out which order it faces.

The six orders are those of the public reference code's population
(Lu-Yang666/MAGE, ``verl/trainer/config/ppo_trainer.yaml``,
``env.tictactoe.opponent_policy_pool``), translated from 0-based (row, col) pairs
to cell indices (cell = 3 * row + col)::

    0 1 2
    3 4 5
    6 7 8
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from mage_core.envs.base import GameState, check_generator

#: The six preferred orders of the reference population, by name.
PATTERNS: dict[str, tuple[int, ...]] = {
    # center, then corners, then edges (corners and edges in reading order)
    "center_corners_edges": (4, 0, 2, 6, 8, 1, 3, 5, 7),
    # corners first, then the center, then edges
    "corners": (0, 2, 6, 8, 4, 1, 3, 5, 7),
    # edges first, then the center, then corners
    "edges": (1, 3, 5, 7, 4, 0, 2, 6, 8),
    # main diagonal top-left to bottom-right, the other corners, then edges
    "diagonal": (0, 4, 8, 2, 6, 1, 3, 5, 7),
    # anti-diagonal top-right to bottom-left, the other corners, then edges
    "anti_diagonal": (2, 4, 6, 0, 8, 1, 3, 5, 7),
    # corners from the bottom-right backwards, the center, edges backwards
    "corners_bottom_right": (8, 6, 2, 0, 4, 7, 5, 3, 1),
}


def _check_order(order: Sequence[int], name: str) -> tuple[int, ...]:
    """A full order must name each of the nine cells exactly once, so the
    player always has a move while the board has an empty cell."""
    cells = tuple(int(cell) for cell in order)
    if sorted(cells) != list(range(9)):
        raise ValueError(
            f"PatternPlayer {name!r}: order must be a permutation of the cells 0..8, "
            f"got {tuple(order)!r}"
        )
    return cells


class PatternPlayer:
    """Plays the first empty cell of ``order`` (deterministic; ignores ``rng``
    beyond validating it)."""

    def __init__(self, name: str, order: Sequence[int]) -> None:
        self.name = name
        self.order = _check_order(order, name)

    @classmethod
    def from_pattern(cls, pattern: str, name: str | None = None) -> "PatternPlayer":
        """The player of one of the six named ``PATTERNS`` (named after it
        unless ``name`` is given)."""
        if pattern not in PATTERNS:
            raise ValueError(f"unknown pattern {pattern!r}; valid patterns: {sorted(PATTERNS)}")
        return cls(pattern if name is None else name, PATTERNS[pattern])

    def act(self, state: GameState, rng: np.random.Generator) -> int:
        check_generator(rng, f"PatternPlayer({self.name!r}).act")
        legal = set(state.legal_moves())
        for cell in self.order:
            if cell in legal:
                return cell
        raise ValueError(f"PatternPlayer {self.name!r}: no legal move (the game is over)")

    def __repr__(self) -> str:
        return f"PatternPlayer(name={self.name!r}, order={self.order})"
