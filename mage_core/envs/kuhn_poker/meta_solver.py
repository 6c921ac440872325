"""The expectimax behind the exact meta-episode values of ``analysis``.

``MetaSolver`` values the remaining hands of a meta-episode from the agent's
information state (its cards, the betting, the opponent's card at showdown) and
its exact belief over the opponent's type; ``solve`` values a whole meta-episode
from a prior. Also here: the exact helpers the best response of ``analysis``
shares with it, so this module imports nothing of ``analysis``.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Callable, Literal, Mapping, Sequence

from mage_core.envs.kuhn_poker.rules import (
    BET,
    MOVES,
    chips_for_player0,
    infoset_key,
    is_showdown,
    is_terminal_history,
)

Restart = Literal["fresh", "same"]

ONE_SIXTH = Fraction(1, 6)  # the probability of each of the 6 deals


def _cards(agent_card: int, opponent_card: int, agent_seat: int) -> tuple[int, int]:
    return (agent_card, opponent_card) if agent_seat == 0 else (opponent_card, agent_card)


def agent_chips(agent_card: int, opponent_card: int, agent_seat: int, history: tuple[int, ...]) -> int:
    """The agent's chips at the end of a hand (``history`` terminal)."""
    chips = chips_for_player0(_cards(agent_card, opponent_card, agent_seat), history)
    return chips if agent_seat == 0 else -chips


def move_probability(p_bet: Fraction, move: int) -> Fraction:
    """The probability of ``move`` for a player who bets with ``p_bet``."""
    return p_bet if move == BET else 1 - p_bet


class MetaSolver:
    """Expectimax over the agent's information states across hands.

    Beliefs are kept UNNORMALISED (weights = prior x likelihood of what was
    seen); values are linear in them, so a belief is normalised only to key the
    memo. Worlds are (weight, opponent type, opponent card). A type is whatever
    ``p_bet(type, infoset)`` reads the opponent's P(BET) from: an index into a
    finite list of strategies, or (``beta_prior_meta_value``) the counts of the
    opponent's bets and passes seen so far under a Beta prior, which ``after``
    updates with every move it sees (conjugacy keeps the posterior exact).
    """

    def __init__(self, p_bet: Callable[[object, str], Fraction], agent_seat: int, restart: Restart,
                 fixed: Mapping[str, int] | None = None,
                 after: Callable[[object, str, int], object] | None = None, early_stop: bool = False) -> None:
        self._p_bet = p_bet
        self._after = after
        self._seat = agent_seat
        self._restart = restart
        self._fixed = fixed  # the agent's move at each infoset in every hand but the last
        self._early_stop = early_stop  # a won hand ends the meta-episode: its chips are the last hand's
        self._memo: dict[tuple, Fraction] = {}

    def fresh(self, belief: Sequence[tuple[object, Fraction]], hands_left: int) -> Fraction:
        """Value of the remaining hands, each with a new deal, given (type, weight) pairs."""
        total = sum((w for _, w in belief), Fraction(0))
        if total == 0:
            return Fraction(0)
        normal = tuple(sorted((t, w / total) for t, w in belief if w))  # type: ignore[type-var]
        key = ("fresh", hands_left, normal)
        if key not in self._memo:
            value = Fraction(0)
            for card in range(3):
                worlds = [(b * ONE_SIXTH, t, o) for t, b in normal for o in range(3) if o != card]
                value += self._hand(card, (), worlds, hands_left)
            self._memo[key] = value
        return total * self._memo[key]

    def same(self, card: int, worlds: list[tuple[Fraction, object, int]], hands_left: int) -> Fraction:
        """Value of the remaining hands, all replaying the deal with ``card``."""
        total = sum((w for w, _, _ in worlds), Fraction(0))
        if total == 0:
            return Fraction(0)
        belief = tuple(sorted((t, o, w / total) for w, t, o in worlds))  # type: ignore[type-var]
        key = ("same", hands_left, card, belief)
        if key not in self._memo:
            self._memo[key] = self._hand(card, (), [(w, t, o) for t, o, w in belief], hands_left)
        return total * self._memo[key]

    def _hand(self, card: int, history: tuple[int, ...], worlds: list, hands_left: int) -> Fraction:
        worlds = [world for world in worlds if world[0] != 0]
        if not worlds:
            return Fraction(0)
        if is_terminal_history(history):
            if hands_left == 1:  # the final hand: its chips are the objective
                return sum((w * agent_chips(card, o, self._seat, history) for w, _, o in worlds), Fraction(0))
            if self._early_stop:  # the agent sees whether it won; a won hand is the last one played
                chips = [agent_chips(card, o, self._seat, history) for _, _, o in worlds]
                stopped = sum((w * c for (w, _, _), c in zip(worlds, chips) if c > 0), Fraction(0))
                lost = [world for world, c in zip(worlds, chips) if c <= 0]
                return stopped + self._next_hand(card, history, lost, hands_left - 1)
            return self._next_hand(card, history, worlds, hands_left - 1)
        if len(history) % 2 == self._seat:
            if self._fixed is not None and hands_left > 1:
                return self._hand(card, history + (self._fixed[infoset_key(card, history)],), worlds, hands_left)
            return max(self._hand(card, history + (move,), worlds, hands_left) for move in MOVES)
        total = Fraction(0)
        for move in MOVES:
            branch = []
            for w, t, o in worlds:
                key = infoset_key(o, history)
                seen = t if self._after is None else self._after(t, key, move)
                branch.append((w * move_probability(self._p_bet(t, key), move), seen, o))
            total += self._hand(card, history + (move,), branch, hands_left)
        return total

    def _next_hand(self, card: int, history: tuple[int, ...], worlds: list, hands_left: int) -> Fraction:
        """Split the worlds by what the agent observed, then recurse per signal:
        a showdown reveals the opponent's card, a fold reveals nothing more."""
        if is_showdown(history):
            groups = [[world for world in worlds if world[2] == o] for o in range(3) if o != card]
        else:
            groups = [worlds]
        total = Fraction(0)
        for group in groups:
            if self._restart == "same":
                total += self.same(card, group, hands_left)
            else:
                type_weights: dict[object, Fraction] = {}
                for w, t, _ in group:
                    type_weights[t] = type_weights.get(t, Fraction(0)) + w
                total += self.fresh(list(type_weights.items()), hands_left)
        return total


def solve(solver: MetaSolver, prior: list[tuple[object, Fraction]], num_hands: int, restart: Restart) -> Fraction:
    """The value of a whole meta-episode from the prior ``(type, weight)`` pairs: a
    fresh deal each hand, or (``same``) each of the first hand's deals replayed."""
    if restart == "fresh":
        return solver.fresh(prior, num_hands)
    total = Fraction(0)
    for card in range(3):
        worlds = [(weight * ONE_SIXTH, t, o) for t, weight in prior for o in range(3) if o != card]
        total += solver.same(card, worlds, num_hands)
    return total
