"""Perfect Tic-Tac-Toe play from an exact solve of the game, and best-response
values against deterministic opponents.

The game has 5,478 reachable positions (docs/method.md section 11), so the whole game
is solved once per process and every move is a table lookup. Perfect play from
the empty board is a draw; the solver's values back the tests that every
preferred-pattern opponent (docs/method.md section 7) is a forced win for a
best-responding agent in either seat.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from mage_core.envs.base import Opponent, check_generator
from mage_core.envs.tic_tac_toe.rules import TicTacToeState, initial_state

#: Game-theoretic value of a position for the player to move: +1 win, 0 draw,
#: -1 loss. At a terminal position "the player to move" is the one who would
#: move next, so a position just won by the other player is worth -1.
ValueTable = dict[tuple[int, ...], int]

_VALUE_CACHE: ValueTable = {}


def _terminal_value(state: TicTacToeState) -> int:
    """-1 if the last mover completed a line (the next player lost), else 0."""
    return 0 if state.winner() is None else -1


def _solve_from(state: TicTacToeState, table: ValueTable) -> int:
    """Negamax with memoisation over board tuples."""
    known = table.get(state.board)
    if known is not None:
        return known
    if state.is_terminal():
        value = _terminal_value(state)
    else:
        value = max(-_solve_from(state.apply(move), table) for move in state.legal_moves())
    table[state.board] = value
    return value


def solve() -> ValueTable:
    """The value of every reachable position for the player to move.

    Computed once per process and cached (why: MinimaxPlayer, best-response
    checks and tests all share it). Callers must not mutate the result.
    """
    if not _VALUE_CACHE:
        table: ValueTable = {}
        _solve_from(initial_state(), table)
        _VALUE_CACHE.update(table)
    return _VALUE_CACHE


def move_values(state: TicTacToeState) -> dict[int, int]:
    """The value of each legal move for the player to move at ``state``."""
    table = solve()
    # Every non-terminal valid board is reachable (no line means no earlier
    # line either), so its children are all in the table.
    return {move: -table[state.apply(move).board] for move in state.legal_moves()}


def _pick_first(optimal: list[int], rng: np.random.Generator) -> int:
    return optimal[0]


def _pick_random(optimal: list[int], rng: np.random.Generator) -> int:
    return optimal[int(rng.integers(len(optimal)))]


_TIE_BREAKS: dict[str, Callable[[list[int], np.random.Generator], int]] = {
    "random": _pick_random,
    "first": _pick_first,
}


class MinimaxPlayer:
    """Plays a game-theoretically optimal move (perfect play).

    ``tie_break="random"`` picks uniformly among optimal moves with the ``rng``
    passed to ``act`` (a less predictable perfect player, used as the reference
    "perfect play" opponent of docs/method.md section 11); ``"first"`` picks the
    lowest optimal cell (deterministic). Optimal means best value only: a slow
    win and a fast win are equal.
    """

    def __init__(self, name: str = "minimax", tie_break: str = "random") -> None:
        if tie_break not in _TIE_BREAKS:
            raise ValueError(
                f"tie_break must be one of {sorted(_TIE_BREAKS)}, got {tie_break!r}"
            )
        self.name = name
        self.tie_break = tie_break
        self._pick = _TIE_BREAKS[tie_break]
        solve()  # pay the one-off solve at construction, not on the first move

    def act(self, state: TicTacToeState, rng: np.random.Generator) -> int:
        check_generator(rng, f"MinimaxPlayer({self.name!r}).act")
        values = move_values(state)
        if not values:
            raise ValueError(f"{self.name}: no legal move at a terminal state {state.board}")
        best = max(values.values())
        optimal = [move for move, value in values.items() if value == best]
        return self._pick(optimal, rng)

    def __repr__(self) -> str:
        return f"MinimaxPlayer(name={self.name!r}, tie_break={self.tie_break!r})"


def _opponent_move(opponent: Opponent, state: TicTacToeState) -> int:
    """The opponent's move, checked for determinism with two different
    generators (why: a best-response value is only defined for a fixed reply)."""
    first = opponent.act(state, np.random.default_rng(0))
    second = opponent.act(state, np.random.default_rng(1))
    if first != second:
        raise ValueError(
            f"best_response_value needs a deterministic opponent: {opponent.name!r} "
            f"played {first} and {second} at {state.board} with different generators"
        )
    return int(first)


def best_response_value(opponent: Opponent, agent_seat: int) -> int:
    """The exact value (+1 win, 0 draw, -1 loss) of a best-responding agent in
    ``agent_seat`` (0 = X, moves first; 1 = O) against a deterministic opponent.

    Searches every agent move; the opponent's replies come from ``opponent.act``
    (docs/method.md section 11: every preferred pattern is a forced win, i.e. +1, in
    both seats).
    """
    if agent_seat not in (0, 1):
        raise ValueError(f"agent_seat must be 0 (X, first) or 1 (O, second), got {agent_seat!r}")
    memo: dict[tuple[int, ...], int] = {}

    def value(state: TicTacToeState) -> int:
        if state.is_terminal():
            winner = state.winner()
            return 0 if winner is None else (1 if winner == agent_seat else -1)
        known = memo.get(state.board)
        if known is not None:
            return known
        if state.to_move == agent_seat:
            result = max(value(state.apply(move)) for move in state.legal_moves())
        else:
            result = value(state.apply(_opponent_move(opponent, state)))
        memo[state.board] = result
        return result

    return value(initial_state())
