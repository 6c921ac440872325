"""MineSweeper's expert: exact odds from what the board shows and what earlier attempts of the
same board revealed.

In its first attempt the expert knows only the open numbers and reveals a closed cell of the
lowest exact mine probability (``mine_probabilities``), ties drawn uniformly; where every
closed cell may hold a mine it guesses, and may lose. In a later attempt of a replayed board
it also reads its memory (``Revealed``, one a finished attempt: the mine that went off, the
cells opened safely): it first reveals again, in the order learnt, the safe cells its memory
names (the flood fill is deterministic, so they open what they opened before), then goes on
with the exact odds of everything the attempts have shown, the known mines included. So what
an attempt reveals is what the next one does better with, and imitation hands that down: the
policy sees the same facts in its memory line (``rollout.context``).
"""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np

from mage_core.envs.base import Revealed, checked_memory
from mage_core.envs.minesweeper.board import Board, Cell, fewest_reveals, mine_probabilities
from mage_core.envs.minesweeper.env import MineSweeperEnv, cell_text

_SUBJECT = re.compile(r"\((\d+), (\d+)\)")
KINDS = ("mine", "safe")


def remembered(env: MineSweeperEnv, memory: Sequence[Revealed]) -> tuple[frozenset[Cell], list[Cell]]:
    """The known mines and the safe cells (in the order first learnt) of ``memory``, checked
    against the board ``env`` plays: a memory of another board, a kind MineSweeper does not
    reveal or a cell off the board is a ValueError of one line naming it."""
    key, board = env.task_key(), env.board
    mines: set[Cell] = set()
    safe: list[Cell] = []
    for attempt, item in checked_memory(memory, key, KINDS, "MineSweeper expert", "board"):
        for kind, subject in item.facts:
            cell = _cell(subject, board, attempt)
            if kind == "mine":
                mines.add(cell)
            elif cell not in safe:
                safe.append(cell)
    if mines & set(safe):
        raise ValueError(f"MineSweeper expert: the memory names {cell_text(sorted(mines & set(safe))[0])} "
                         f"both a mine and safe")
    return frozenset(mines), safe


def _cell(subject: str, board: Board, attempt: int) -> Cell:
    found = _SUBJECT.fullmatch(subject)
    row, col = (int(found.group(1)) - 1, int(found.group(2)) - 1) if found else (-1, -1)
    if not (0 <= row < board.rows and 0 <= col < board.cols):
        raise ValueError(f"MineSweeper expert: memory item {attempt} names cell {subject!r}, not a cell of this "
                         f"{board.rows}x{board.cols} board")
    return row, col


def act(env: MineSweeperEnv, rng: np.random.Generator, memory: Sequence[Revealed] = ()) -> str:
    """The next reveal (module docstring): a remembered safe cell still closed (those that
    opened a region first, then in the order learnt), else a closed cell of the lowest exact
    mine probability given the board (every remembered cell open by then) and the known mines,
    ties drawn uniformly (row by row, as ``legal_actions``)."""
    mines, safe = remembered(env, memory)
    board = env.board
    # The remembered cells that opened a region first (their number, 0, was shown), so that
    # the cells a region opens are not spent a turn each.
    for cell in sorted(safe, key=lambda c: board.count(c) != 0):
        if cell not in board.opened:
            return cell_text(cell)
    probabilities = mine_probabilities(board, env.settings.num_mines, mines)  # the closed cells'
    lowest = min(probabilities.values())
    best = [cell for cell, p in probabilities.items() if p == lowest]
    return cell_text(best[int(rng.integers(len(best)))])


def clearable(env: MineSweeperEnv) -> bool:
    """Whether the board ``env`` plays (as drawn, whatever was played since) clears within the
    turn limit for a player who knows where every mine is (``fewest_reveals``): no play of any
    attempt wins a board for which it does not."""
    return fewest_reveals(env.first_board) <= env.settings.max_turns
