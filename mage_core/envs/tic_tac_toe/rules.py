"""Tic-Tac-Toe rules: an immutable, hashable state with integer moves.

Cells are numbered 0..8 row-major::

    0 1 2
    3 4 5
    6 7 8

A cell holds 0 (empty), 1 (X = player 0, who moves first) or 2 (O = player 1).
The state is a plain tuple of nine ints plus two derived fields computed once at
construction (the winner and the player to move), so ``apply`` is cheap enough
for the generic reference MCTS and the minimax solver. The specialised MCTS
(``mage_core.opponents.mcts``) indexes all 5,478 reachable states once and never
touches this class in its inner loop (docs/method.md section 11).

This module knows nothing about text: rendering and action parsing live in
``env.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from numbers import Integral
from typing import Iterable

from mage_core.envs.base import TERMINAL

#: Number of cells on the board.
NUM_CELLS = 9
#: Cell value of an empty cell, an X and an O.
EMPTY, X_MARK, O_MARK = 0, 1, 2

#: The eight winning lines (rows, columns, diagonals), precomputed once.
WIN_LINES: tuple[tuple[int, int, int], ...] = (
    (0, 1, 2),
    (3, 4, 5),
    (6, 7, 8),
    (0, 3, 6),
    (1, 4, 7),
    (2, 5, 8),
    (0, 4, 8),
    (2, 4, 6),
)


def _winner_of(board: tuple[int, ...]) -> int | None:
    """The player index (0 for X, 1 for O) owning a full line, or None."""
    for a, b, c in WIN_LINES:
        mark = board[a]
        if mark != EMPTY and mark == board[b] and mark == board[c]:
            return mark - 1
    return None


def _check_board(board: object) -> tuple[int, ...]:
    """Reject boards that no legal game can produce (why: states are built from
    user input in tests and golden files, and a silent bad board poisons a
    transposition table)."""
    if not isinstance(board, tuple) or len(board) != NUM_CELLS:
        raise ValueError(f"board must be a tuple of {NUM_CELLS} ints, got {board!r}")
    if any(cell not in (EMPTY, X_MARK, O_MARK) for cell in board):
        raise ValueError(f"board cells must be 0 (empty), 1 (X) or 2 (O), got {board!r}")
    num_x, num_o = board.count(X_MARK), board.count(O_MARK)
    if num_x - num_o not in (0, 1):
        raise ValueError(
            f"board {board!r} has {num_x} X and {num_o} O: X moves first, so "
            "the X count must equal the O count or exceed it by one"
        )
    return board


@dataclass(frozen=True, slots=True)
class TicTacToeState:
    """An immutable Tic-Tac-Toe position (implements ``GameState``).

    ``board`` is the only identity: equality and hashing use it alone. The
    winner and the player to move are derived once in ``__post_init__``.
    """

    board: tuple[int, ...]
    _winner: int | None = field(init=False, repr=False, compare=False)
    _to_move: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        board = _check_board(self.board)
        winner = _winner_of(board)
        if winner is None and EMPTY in board:
            to_move = 0 if board.count(X_MARK) == board.count(O_MARK) else 1
        else:
            to_move = TERMINAL
        object.__setattr__(self, "_winner", winner)
        object.__setattr__(self, "_to_move", to_move)

    @property
    def to_move(self) -> int:
        """0 (X) or 1 (O) for the player to act, ``TERMINAL`` when over."""
        return self._to_move

    def legal_moves(self) -> tuple[int, ...]:
        """Empty cells in ascending order; none once the game is over."""
        if self._to_move == TERMINAL:
            return ()
        return tuple(cell for cell in range(NUM_CELLS) if self.board[cell] == EMPTY)

    def apply(self, move: int) -> "TicTacToeState":
        """The position after the player to move marks ``move``."""
        if self._to_move == TERMINAL:
            raise ValueError(f"move {move!r} is illegal: the game is over")
        if isinstance(move, bool) or not isinstance(move, Integral) or not 0 <= move < NUM_CELLS:
            raise ValueError(f"move {move!r} is illegal: cells are ints 0..8")
        move = int(move)
        if self.board[move] != EMPTY:
            raise ValueError(f"move {move} is illegal: cell {move} is already taken")
        mark = X_MARK if self._to_move == 0 else O_MARK
        board = self.board[:move] + (mark,) + self.board[move + 1 :]
        return TicTacToeState(board)

    def is_terminal(self) -> bool:
        return self._to_move == TERMINAL

    def winner(self) -> int | None:
        """0 if X has a line, 1 if O has one, None otherwise (ongoing or draw)."""
        return self._winner

    def returns(self) -> tuple[float, float]:
        """(+1, -1) if X won, (-1, +1) if O won, (0, 0) for a draw or an
        unfinished game (the protocol asks for payoffs at terminal states)."""
        if self._winner == 0:
            return (1.0, -1.0)
        if self._winner == 1:
            return (-1.0, 1.0)
        return (0.0, 0.0)

    def key(self) -> tuple[int, ...]:
        """The board tuple: it determines the whole state."""
        return self.board


_INITIAL = TicTacToeState((EMPTY,) * NUM_CELLS)


def initial_state() -> TicTacToeState:
    """The empty board, X to move."""
    return _INITIAL


def play_moves(moves: Iterable[int], state: TicTacToeState | None = None) -> TicTacToeState:
    """The position after ``moves`` (cell indices, alternating players) from
    ``state`` (default: the empty board). Handy for tests and benchmarks."""
    current = _INITIAL if state is None else state
    for move in moves:
        current = current.apply(move)
    return current


def reachable_states() -> dict[tuple[int, ...], TicTacToeState]:
    """Every position reachable from the empty board by legal play, keyed by
    board, in breadth-first order (5,478 of them; docs/method.md section 11)."""
    seen: dict[tuple[int, ...], TicTacToeState] = {_INITIAL.board: _INITIAL}
    frontier = [_INITIAL]
    while frontier:
        next_frontier = []
        for state in frontier:
            for move in state.legal_moves():
                child = state.apply(move)
                if child.board not in seen:
                    seen[child.board] = child
                    next_frontier.append(child)
        frontier = next_frontier
    return seen
