"""Kuhn Poker rules (docs/method.md section 11): three cards, one betting round.

Cards J < Q < K are the integers 0 < 1 < 2. Both players ante 1 chip; player 0
acts first. A move is ``PASS`` (0: check, or fold when facing a bet) or ``BET``
(1: bet, or call when facing a bet). The five terminal histories and what they
pay player 0:

======== ============================== =========================
history  what happened                  chips for player 0
======== ============================== =========================
``pp``   check, check: showdown         +1 / -1 (higher card)
``bp``   bet, fold                      +1
``bb``   bet, call: showdown            +2 / -2
``pbp``  check, bet, fold               -1
``pbb``  check, bet, call: showdown     +2 / -2
======== ============================== =========================

Information sets use ONE string format everywhere (strategies, CFR, analysis,
params.yaml): the acting player's card letter followed by the history letters,
``p`` for PASS and ``b`` for BET, e.g. ``"Q"``, ``"Kp"``, ``"Jpb"``, ``"Qb"``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from mage_core.envs.base import TERMINAL, check_generator

PASS = 0
BET = 1
MOVES: tuple[int, int] = (PASS, BET)

#: Card letters by rank (J < Q < K).
CARD_LETTERS: tuple[str, str, str] = ("J", "Q", "K")
#: History letter of each move.
MOVE_LETTERS: dict[int, str] = {PASS: "p", BET: "b"}
#: Action names shown to the agent (docs/method.md section 2: names, never integers).
MOVE_NAMES: dict[int, str] = {PASS: "PASS", BET: "BET"}

#: The 6 equally likely ordered deals (card of player 0, card of player 1).
DEALS: tuple[tuple[int, int], ...] = tuple(
    (c0, c1) for c0 in range(3) for c1 in range(3) if c0 != c1
)

#: Terminal histories (as move tuples) -> (pot won by the winner per player,
#: who wins: "showdown" or the player index that did not fold).
_TERMINALS: dict[tuple[int, ...], tuple[int, str | int]] = {
    (PASS, PASS): (1, "showdown"),
    (BET, PASS): (1, 0),
    (BET, BET): (2, "showdown"),
    (PASS, BET, PASS): (1, 1),
    (PASS, BET, BET): (2, "showdown"),
}

#: Every betting sequence that can occur (prefixes of the terminal ones).
_VALID_HISTORIES: frozenset[tuple[int, ...]] = frozenset(
    h[:i] for h in _TERMINALS for i in range(len(h) + 1)
)

#: The information sets of each seat, in a fixed order (card-major within a
#: decision point): player 0 opens or answers a check-bet; player 1 answers a
#: check or a bet.
INFOSETS_BY_SEAT: dict[int, tuple[str, ...]] = {
    0: ("J", "Q", "K", "Jpb", "Qpb", "Kpb"),
    1: ("Jp", "Qp", "Kp", "Jb", "Qb", "Kb"),
}
ALL_INFOSETS: tuple[str, ...] = INFOSETS_BY_SEAT[0] + INFOSETS_BY_SEAT[1]


#: The letters of every valid betting sequence (looked up on every opponent move).
_LETTERS: dict[tuple[int, ...], str] = {h: "".join(MOVE_LETTERS[m] for m in h) for h in _VALID_HISTORIES}


def history_letters(history: Sequence[int]) -> str:
    """``(0, 1)`` -> ``"pb"``."""
    letters = _LETTERS.get(history) if isinstance(history, tuple) else None
    return letters if letters is not None else "".join(MOVE_LETTERS[m] for m in history)


def infoset_key(card: int, history: Sequence[int]) -> str:
    """The canonical information-set string of the player holding ``card``."""
    return CARD_LETTERS[card] + history_letters(history)


def is_terminal_history(history: Sequence[int]) -> bool:
    return tuple(history) in _TERMINALS


def is_showdown(history: Sequence[int]) -> bool:
    """True when the hand ends with both cards shown (nobody folded)."""
    terminal = _TERMINALS.get(tuple(history))
    return terminal is not None and terminal[1] == "showdown"


def chips_for_player0(cards: tuple[int, int], history: Sequence[int]) -> int:
    """Player 0's net chips at a terminal history (player 1 gets the negative)."""
    terminal = _TERMINALS.get(tuple(history))
    if terminal is None:
        raise ValueError(f"history {history_letters(history)!r} is not terminal")
    amount, winner = terminal
    if winner == "showdown":
        winner = 0 if cards[0] > cards[1] else 1
    return amount if winner == 0 else -amount


def _check_cards(cards: tuple[int, int]) -> None:
    if len(cards) != 2 or any(c not in (0, 1, 2) for c in cards) or cards[0] == cards[1]:
        raise ValueError(f"cards must be two distinct cards from 0, 1, 2 (J, Q, K), got {cards}")


@dataclass(frozen=True)
class KuhnState:
    """A dealt Kuhn Poker hand and the betting so far (GameState protocol).

    There is no chance node: the deal happens in ``deal``/``initial_state``, so
    every state has both cards fixed and ``to_move`` is 0, 1 or ``TERMINAL``.
    """

    cards: tuple[int, int]
    history: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        # Normalise lists/numpy ints to tuples of int so states hash and compare.
        object.__setattr__(self, "cards", tuple(int(c) for c in self.cards))
        object.__setattr__(self, "history", tuple(int(m) for m in self.history))
        _check_cards(self.cards)
        if tuple(self.history) not in _VALID_HISTORIES:
            raise ValueError(
                f"history {self.history} is not a Kuhn Poker betting sequence "
                f"(moves 0=PASS, 1=BET; terminal: pp, bp, bb, pbp, pbb)"
            )

    @property
    def to_move(self) -> int:
        if self.is_terminal():
            return TERMINAL
        return len(self.history) % 2

    def legal_moves(self) -> tuple[int, ...]:
        return () if self.is_terminal() else MOVES

    def apply(self, move: int) -> "KuhnState":
        if self.is_terminal():
            raise ValueError(f"cannot move in a finished hand (history {self.history_string()!r})")
        if move not in MOVES:
            raise ValueError(f"move must be 0 (PASS) or 1 (BET), got {move!r}")
        # Both parts are already checked: skip __post_init__ (a hot path of every rollout).
        state = object.__new__(KuhnState)
        object.__setattr__(state, "cards", self.cards)
        object.__setattr__(state, "history", self.history + (int(move),))
        return state

    def is_terminal(self) -> bool:
        return self.history in _TERMINALS

    def returns(self) -> tuple[int, int]:
        """Net chips of players 0 and 1 (zero-sum); raises before the end."""
        chips = chips_for_player0(self.cards, self.history)
        return chips, -chips

    def key(self) -> tuple[tuple[int, int], tuple[int, ...]]:
        return (self.cards, self.history)

    def infoset(self, player: int) -> str:
        """What ``player`` knows: its own card and the betting (e.g. ``"Qpb"``)."""
        if player not in (0, 1):
            raise ValueError(f"player must be 0 or 1, got {player!r}")
        return infoset_key(self.cards[player], self.history)

    def history_string(self) -> str:
        return history_letters(self.history)

    def is_showdown(self) -> bool:
        return is_showdown(self.history)

    def contributions(self) -> tuple[int, int]:
        """Chips each player has put in the pot so far (ante included)."""
        put_in = [1, 1]
        for index, move in enumerate(self.history):
            put_in[index % 2] += move  # a BET (bet or call) adds one chip
        return put_in[0], put_in[1]


def deal(rng: np.random.Generator) -> tuple[int, int]:
    """A uniformly random ordered pair of distinct cards (one of ``DEALS``)."""
    check_generator(rng, "deal")
    return DEALS[int(rng.integers(len(DEALS)))]


def initial_state(rng: np.random.Generator) -> KuhnState:
    """A freshly dealt hand before any betting."""
    return KuhnState(deal(rng), ())
