"""The MineSweeper agent environment (the ``Env`` protocol of envs/base.py).

LaMer's fourth environment, as its public code sets it (docs/environments.md, "MineSweeper",
says where this one differs): a 6 x 6 board with 3 mines whose first reveal the environment
makes, at most 7 turns, one reveal a turn written ``(row, col)`` with rows and columns
numbered from 1 at the top left. Rewards per turn: ``reveal_reward`` (0.5) when the reveal
opens one cell, ``cascade_reward`` (2.0) when it opens more, ``win_reward`` (10.0) instead when
it opens the last safe cell, ``mine_reward`` (-0.1) when it opens a mine (the episode ends,
lost). ``restart()`` returns to the same board after its first reveal.

Only closed cells are legal actions, so an open or off-board cell is an invalid action (no
task reward, the turn counts, the invalid-action penalty applies: docs/rewards.md); LaMer
instead pays -1.0 for a reveal that changes nothing. Stalling: an episode that the turn
limit ends after an invalid turn pays, on its last turn, what brings its task reward down
to ``legal_return_floor()``.
"""

from __future__ import annotations

import re

import numpy as np

from mage_core.envs.base import Outcome, Revealed, StepResult, check_generator, extract_action_text
from mage_core.envs.minesweeper.board import Board, Cell, draw_board
from mage_core.envs.minesweeper.params import MineSweeperSettings
from mage_core.envs.rewards import stalled_timeout_reward

#: LaMer's rule (``minesweeper_projection`` in its ``projection.py``): the first ``(row, col)`` anywhere
#: in the action text, parentheses required, spaces (only spaces) allowed around the numbers.
_CELL = re.compile(r"\(( *\d+) *, *(\d+) *\)")
LEGEND = "? closed, . open with no mine around, 1-8 mines around, * the mine that went off"


def cell_text(cell: Cell) -> str:
    """The canonical action text of a 0-based cell: ``(row, col)``, 1-based."""
    return f"({cell[0] + 1}, {cell[1] + 1})"


class MineSweeperEnv:
    """MineSweeper from the agent's seat. ``reset()`` draws a board from ``rng``
    (or re-uses ``board``, a board after its first reveal); ``restart()`` replays it."""

    name = "minesweeper"

    def __init__(self, settings: MineSweeperSettings, rng: np.random.Generator, board: Board | None = None) -> None:
        self.settings = settings
        self._rng = check_generator(rng, "MineSweeperEnv")
        if board is not None and (board.rows, len(board.mines)) != (settings.board_size, settings.num_mines):
            raise ValueError(f"board is {board.rows}x{board.cols} with {len(board.mines)} mines; settings say "
                             f"{settings.board_size}x{settings.board_size} with {settings.num_mines}")
        self._fixed = board
        self._initial: Board | None = None
        self._board: Board | None = None
        self._turn = 0
        self._done = False
        self._reward_so_far = 0.0
        self._had_invalid = False
        self._clicks: list[Cell] = []  # this episode's reveals, in order

    # ----- life cycle -------------------------------------------------
    def reset(self) -> None:
        s = self.settings
        self._initial = self._fixed or draw_board(self._rng, s.board_size, s.board_size, s.num_mines)
        self.restart()

    def restart(self) -> None:
        self._board = self._require_board(self._initial)
        self._turn = 0
        self._done = False
        self._reward_so_far = 0.0
        self._had_invalid = False
        self._clicks = []

    # ----- views ------------------------------------------------------
    @property
    def done(self) -> bool:
        return self._done

    @property
    def turn(self) -> int:
        return self._turn

    def task_key(self) -> str:
        """The board as drawn: its mines and the cells the first (safe) reveal opened
        (``envs.base.KeyedTask``)."""
        b = self._require_board(self._initial)
        return f"minesweeper {b.rows}x{b.cols} mines {sorted(b.mines)} opened {sorted(b.opened)}"

    @property
    def first_board(self) -> Board:
        """The board as drawn, its first reveal made: what every attempt starts from (mines
        included: for oracles, never shown)."""
        return self._require_board(self._initial)

    @property
    def board(self) -> Board:
        """The current board (mines included: for tests and oracles, never shown)."""
        return self._require_board(self._board)

    def revealed(self) -> Revealed:
        """What this episode's reveals showed (``envs.base.Revealing``): ``mine`` the cell that
        went off, if one did; ``safe`` every cell it opened without a mine, in the order opened.
        Revealing the safe ones again from the same first board opens exactly what they opened
        (the flood fill is deterministic), so they carry every number the episode saw."""
        board = self.board
        facts = [("safe", cell_text(c)) for c in self._clicks if c not in board.mines]
        if board.exploded is not None:
            facts.insert(0, ("mine", cell_text(board.exploded)))
        return Revealed(self.task_key(), tuple(facts))

    def memory_line(self, revealed: Revealed, style: str) -> str:
        """``mine (1,4) safe (2,4) (3,1)`` (compact: each cell one word) or ``mine: (1, 4); safe:
        (2, 4), (3, 1).`` (paper)."""
        return revealed.line(style, self.compact_action if style == "compact" else None)

    def legal_return_floor(self) -> float:
        """Legal play earns at least ``return_bounds()[0]``: reveals, then a mine."""
        return self.settings.return_bounds()[0]

    def observation(self) -> str:
        """The board with 1-based row and column numbers, the legend and the mine count."""
        board = self.board
        header = "   " + " ".join(str(c) for c in range(1, board.cols + 1))
        body = [f"{r + 1:>2} " + " ".join(row) for r, row in enumerate(board.symbol_rows())]
        closed = len(board.closed())
        return "\n".join([f"Legend: {LEGEND}. Row 1 is the top, column 1 the left.", header, *body,
                          f"Mines: {len(board.mines)}; closed cells: {closed}"])

    def compact_observation(self) -> str:
        """Rows of symbols separated by ``/``, then ``cleared``, ``boom`` or ``timeout`` once
        the episode is over."""
        board = self.board
        rows = " / ".join(" ".join(row) for row in board.symbol_rows())
        if not self._done:
            return rows
        return f"{rows} {'cleared' if board.won else 'boom' if board.lost else 'timeout'}"

    def compact_action(self, action: str) -> str:
        """``"(2, 3)"`` -> ``"(2,3)"``: one word, kept whole by the embedded tokenizer."""
        return "".join(action.split())

    def legal_actions(self) -> list[str]:
        """Every closed cell as ``(row, col)``, row by row; empty once the episode is over."""
        board = self.board
        return [] if self._done else [cell_text(cell) for cell in board.closed()]

    def parse_action(self, response: str) -> str | None:
        """The closed cell of a response's last ``<action>`` block, read as LaMer reads it: the
        first ``(row, col)`` in the block, wherever it stands (``reveal (1, 4)``, ``(1,4) because
        ...``), parentheses required and only spaces around the numbers. None: no block, no such
        pair (``1, 4``, ``(1 4)``, ``[1, 4]``, a tab or newline inside), or the first pair off the
        board or already open. Never raises."""
        if not isinstance(response, str) or self._board is None:
            return None
        text = extract_action_text(response)
        found = _CELL.search(text) if text is not None else None
        if found is None:
            return None
        try:
            row, col = int(found.group(1)) - 1, int(found.group(2)) - 1
        except ValueError:  # more digits than int() reads (4,300): off any board
            return None
        board = self._board
        if not (0 <= row < board.rows and 0 <= col < board.cols) or (row, col) in board.opened:
            return None
        return cell_text((row, col))

    # ----- dynamics ---------------------------------------------------
    def step(self, action: str | None) -> StepResult:
        """Play one turn: reveal the cell of ``action`` (a text from ``legal_actions()``) or,
        for None, nothing (an invalid turn; module docstring)."""
        board = self.board
        if self._done:
            raise RuntimeError("MineSweeperEnv.step: the episode is over; call reset() or restart()")
        s = self.settings
        reward, opened = 0.0, 0
        if action is not None:
            if action not in self.legal_actions():
                raise ValueError(f"MineSweeperEnv.step: action must be a closed cell from legal_actions() such as "
                                 f"'(2, 3)' (or None), got {action!r}")
            row, col = (int(x) - 1 for x in action.strip("()").split(","))
            after = board.reveal((row, col))
            self._clicks.append((row, col))
            opened = len(after.opened) - len(board.opened)
            board = after
            reward = (s.mine_reward if board.lost else s.win_reward if board.won
                      else s.cascade_reward if opened > 1 else s.reveal_reward)
        self._board = board
        self._turn += 1
        outcome = (Outcome.LOSS if board.lost else Outcome.WIN if board.won
                   else Outcome.TIMEOUT if self._turn >= s.max_turns else None)
        self._done = outcome is not None
        self._had_invalid |= action is None
        if outcome is Outcome.TIMEOUT and self._had_invalid:
            reward = stalled_timeout_reward(self._reward_so_far, reward, self.legal_return_floor())
        self._reward_so_far += reward
        info = {"opened": opened, "closed": len(board.closed()), "cleared": board.won, "exploded": board.lost}
        return StepResult(reward=reward, done=self._done, invalid=action is None, outcome=outcome, info=info)

    @staticmethod
    def _require_board(board: Board | None) -> Board:
        if board is None:
            raise RuntimeError("MineSweeperEnv: call reset() before using the environment")
        return board
