"""Tic-Tac-Toe from the agent's seat: text observation, action parsing, rewards.

One episode is one game against one fixed opponent (docs/method.md sections 1-3).
The agent answers ``<action>(row, col)</action>`` with 1-based coordinates; the
canonical action text is exactly ``"(2, 3)"``. An answer without a parsable legal
cell is invalid: no task reward, the turn counts against ``max_turns``, the
opponent does not move (docs/method.md section 2). Rewards: +10 win, -10 loss, 0 draw
or timeout (docs/method.md sections 3 and 10).

Stalling (docs/rewards.md): an episode that the turn limit ends after at least
one invalid turn pays ``legal_return_floor()`` = ``min(loss_reward, 0)`` on its
last turn, the worst a legal game can end with (a loss; 0 for a legal timeout,
possible only with ``max_turns`` below 5), so invalid turns never buy a better
result than losing. With the paper's 8 turns a legal game always ends first
(the agent moves at most 5 times), so every timeout there had invalid turns.

The observation is compact and deterministic: exact text equality of
observations defines GiGPO's anchor states (docs/method.md section 5), so it holds
the seat and the board and nothing that varies for the same position (no turn
counter, no opponent name).
"""

from __future__ import annotations

import re

import numpy as np

from mage_core.envs.base import Opponent, Outcome, StepResult, check_generator, extract_action_text
from mage_core.envs.rewards import stalled_timeout_reward
from mage_core.envs.tic_tac_toe.params import TicTacToeSettings
from mage_core.envs.tic_tac_toe.rules import EMPTY, TicTacToeState, initial_state

_MARKS = {EMPTY: ".", 1: "X", 2: "O"}
_SEAT_MARK = {0: "X", 1: "O"}
#: "(2, 3)", "(2,3)", "2, 3", "( 2 , 3 )", "[2,3]", "2,3." - ASCII digits 1..3 only.
_COORDS = re.compile(r"[(\[]?\s*([1-3])\s*,\s*([1-3])\s*[)\]]?\s*\.?", re.ASCII)
_RESULT_TEXT = {
    Outcome.WIN: "Game over: you won.",
    Outcome.LOSS: "Game over: you lost.",
    Outcome.DRAW: "Game over: draw, the board is full.",
}


def cell_to_action(cell: int) -> str:
    """The canonical action text of a cell index: 5 -> "(2, 3)"."""
    row, col = divmod(cell, 3)
    return f"({row + 1}, {col + 1})"


def parse_coordinates(text: str) -> int | None:
    """The cell index named by ``text`` ("(2, 3)" and loose variants), or None."""
    match = _COORDS.fullmatch(text.strip())
    if match is None:
        return None
    return 3 * (int(match.group(1)) - 1) + int(match.group(2)) - 1


def render_board(board: tuple[int, ...]) -> str:
    """The board with 1-based row and column numbers, "." for an empty cell."""
    lines = ["  1 2 3"]
    for row in range(3):
        marks = " ".join(_MARKS[board[3 * row + col]] for col in range(3))
        lines.append(f"{row + 1} {marks}")
    return "\n".join(lines)


class TicTacToeEnv:
    """One game against ``opponent`` from ``agent_seat`` (implements ``Env``).

    Seat 0: the agent plays X and moves first. Seat 1: the agent plays O and the
    opponent opens; its opening move belongs to the episode's initial state, so
    ``restart()`` replays the same opening (as the reference code does, docs/method.md
    section 1). ``rng`` drives the opponent's moves and keeps running across
    episodes.
    """

    name = "tic_tac_toe"

    def __init__(
        self,
        settings: TicTacToeSettings,
        opponent: Opponent,
        agent_seat: int,
        rng: np.random.Generator,
    ) -> None:
        if not isinstance(settings, TicTacToeSettings):
            raise TypeError(f"settings must be TicTacToeSettings, got {type(settings).__name__}")
        if agent_seat not in (0, 1) or isinstance(agent_seat, bool):
            raise ValueError(f"agent_seat must be 0 (X, moves first) or 1 (O), got {agent_seat!r}")
        if not callable(getattr(opponent, "act", None)):
            raise TypeError(f"opponent must have an act(state, rng) method, got {opponent!r}")
        self.settings = settings
        self.opponent = opponent
        self.agent_seat = agent_seat
        self.rng = check_generator(rng, "TicTacToeEnv")
        self._initial: TicTacToeState | None = None
        self._initial_moves: tuple[tuple[str, str], ...] = ()
        self._state = initial_state()
        self._moves: list[tuple[str, str]] = []
        self._turn = 0
        self._outcome: Outcome | None = None
        self._had_invalid = False

    # -- life cycle ---------------------------------------------------------

    def reset(self) -> None:
        """Empty board; the opponent opens when the agent holds O."""
        self._state = initial_state()
        self._moves = []
        if self.agent_seat == 1:
            self._opponent_moves()
        self._initial = self._state
        self._initial_moves = tuple(self._moves)
        self._turn = 0
        self._outcome = None
        self._had_invalid = False

    def restart(self) -> None:
        """Back to this episode's initial state (same board, same opening)."""
        if self._initial is None:
            raise RuntimeError("TicTacToeEnv.restart() before reset()")
        self._state = self._initial
        self._moves = list(self._initial_moves)
        self._turn = 0
        self._outcome = None
        self._had_invalid = False

    # -- what the agent sees ------------------------------------------------

    def observation(self) -> str:
        self._require_started("observation")
        mine, theirs = _SEAT_MARK[self.agent_seat], _SEAT_MARK[1 - self.agent_seat]
        header = f"You play {mine}; the opponent plays {theirs}."
        if self._outcome is None:
            footer = f"Your move as {mine}. Legal moves: {', '.join(self.legal_actions())}"
        elif self._outcome is Outcome.TIMEOUT:
            footer = f"Game over: the turn limit of {self.settings.max_turns} was reached."
            if self._had_invalid:
                footer += " A game stalled by invalid moves counts as a loss."
        else:
            footer = _RESULT_TEXT[self._outcome]
        return f"{header}\n{render_board(self._state.board)}\n{footer}"

    def compact_observation(self) -> str:
        """The board in few tokens, for small models (prompt style ``compact``):
        nine cells row by row as ``me``, ``op`` or ``.`` (relative to the agent,
        so both seats share patterns), then the result once the game is over."""
        self._require_started("compact_observation")
        names = {0: ".", 1 + self.agent_seat: "me", 2 - self.agent_seat: "op"}
        cells = " ".join(names[c] for c in self._state.board)
        return cells if self._outcome is None else f"{cells} {self._outcome.value}"

    def compact_action(self, action: str) -> str:
        """A legal action as ONE word of the compact style (``"(2, 3)"`` -> ``"(2,3)"``,
        ``"up, left"`` -> ``"up,left"``): the embedded tokenizer keeps every such word
        whole, so a constrained choice is read at one position."""
        return "".join(action.split())

    def legal_actions(self) -> list[str]:
        if self._outcome is not None:
            return []
        return [cell_to_action(cell) for cell in self._state.legal_moves()]

    def parse_action(self, response: str) -> str | None:
        """The canonical legal action inside the last <action> tag, or None."""
        if not isinstance(response, str) or self._outcome is not None:
            return None
        inner = extract_action_text(response)
        if inner is None:
            return None
        cell = parse_coordinates(inner)
        if cell is None or self._state.board[cell] != EMPTY:
            return None
        return cell_to_action(cell)

    # -- acting ---------------------------------------------------------------

    def step(self, action: str | None) -> StepResult:
        """One agent turn, then the opponent's reply if the game goes on."""
        self._require_started("step")
        if self._outcome is not None:
            raise RuntimeError("TicTacToeEnv.step() after the episode ended; call restart()")
        self._turn += 1
        cell = parse_coordinates(action) if isinstance(action, str) else None
        if cell is None or self._state.board[cell] != EMPTY:
            return self._finish_turn(invalid=True, agent_move=None, opponent_move=None)
        self._play(cell, "you")
        opponent_move = None
        if not self._state.is_terminal():
            opponent_move = self._opponent_moves()
        return self._finish_turn(invalid=False, agent_move=cell_to_action(cell),
                                 opponent_move=opponent_move)

    def legal_return_floor(self) -> float:
        """The worst task reward a legal game can end with: ``loss_reward``, or 0
        if that is lower (a legal timeout); what a stalled game pays."""
        return min(self.settings.loss_reward, 0.0)

    @property
    def done(self) -> bool:
        return self._outcome is not None

    @property
    def turn(self) -> int:
        return self._turn

    @property
    def outcome(self) -> Outcome | None:
        """How the episode ended, None while it runs."""
        return self._outcome

    @property
    def state(self) -> TicTacToeState:
        """The current rules state (for tests, tournaments and golden files)."""
        return self._state

    @property
    def moves(self) -> tuple[tuple[str, str], ...]:
        """Every move of the episode so far as ("you" | "opponent", "(r, c)"),
        including the opponent's opening when the agent holds O."""
        return tuple(self._moves)

    # -- internals ------------------------------------------------------------

    def _require_started(self, what: str) -> None:
        if self._initial is None:
            raise RuntimeError(f"TicTacToeEnv.{what}() before reset()")

    def _play(self, cell: int, who: str) -> None:
        self._state = self._state.apply(cell)
        self._moves.append((who, cell_to_action(cell)))

    def _opponent_moves(self) -> str:
        cell = int(self.opponent.act(self._state, self.rng))
        if cell not in self._state.legal_moves():
            raise RuntimeError(
                f"opponent {self.opponent.name!r} chose an illegal cell {cell} at "
                f"{self._state.board}"
            )
        self._play(cell, "opponent")
        return cell_to_action(cell)

    def _finish_turn(self, invalid: bool, agent_move: str | None,
                     opponent_move: str | None) -> StepResult:
        """Settle the outcome and reward after the agent's turn (and reply)."""
        self._had_invalid |= invalid
        reward = 0.0
        if self._state.is_terminal():
            winner = self._state.winner()
            if winner is None:
                self._outcome, reward = Outcome.DRAW, self.settings.draw_reward
            elif winner == self.agent_seat:
                self._outcome, reward = Outcome.WIN, self.settings.win_reward
            else:
                self._outcome, reward = Outcome.LOSS, self.settings.loss_reward
        elif self._turn >= self.settings.max_turns:
            self._outcome = Outcome.TIMEOUT
            if self._had_invalid:  # no reward came before the end of a game
                reward = stalled_timeout_reward(0.0, 0.0, self.legal_return_floor())
        info = {"agent_move": agent_move, "opponent_move": opponent_move}
        return StepResult(reward=float(reward), done=self._outcome is not None,
                          invalid=invalid, outcome=self._outcome, info=info)
