"""Counterfactual regret minimisation over Kuhn Poker (docs/method.md section 7).

Vanilla CFR (regret matching, not CFR+), with ALTERNATING updates and uniform
averaging: the same algorithm as OpenSpiel's ``CFRSolver`` with its defaults,
which the reference code ran for 1000 iterations to build its "CFR" opponent.
Each iteration first updates player 0's regrets and average strategy with a full
traversal, refreshes the current policy, then does the same for player 1 against
the refreshed policy. Deterministic: no randomness at all.

Two opponents come out of the average strategy:

- ``cfr_strategy``: plays the average strategy by sampling - the honest
  approximation of a Nash equilibrium (the unseen opponent of section 8).
- ``cfr_argmax_strategy``: always takes the more likely action of the average
  strategy (PASS on a tie, like ``max`` over ``[PASS, BET]``). This is what the
  reference code calls CFR; it is deterministic and exploitable.
"""

from __future__ import annotations

import functools
from fractions import Fraction

from mage_core.envs.kuhn_poker.rules import (
    ALL_INFOSETS,
    BET,
    DEALS,
    MOVES,
    PASS,
    chips_for_player0,
    infoset_key,
    is_terminal_history,
)
from mage_core.opponents.kuhn import BehaviourStrategy

#: The reference code's iteration count (OpenSpiel CFRSolver, 1000 iterations).
REFERENCE_ITERATIONS = 1000


class _Tables:
    """Cumulative regrets, cumulative (average) policy and current policy."""

    def __init__(self) -> None:
        self.regret = {key: [0.0, 0.0] for key in ALL_INFOSETS}
        self.policy_sum = {key: [0.0, 0.0] for key in ALL_INFOSETS}
        self.current = {key: [0.5, 0.5] for key in ALL_INFOSETS}

    def refresh_current(self) -> None:
        """Regret matching: play in proportion to positive regret, else uniform."""
        for key, regrets in self.regret.items():
            positive = [max(r, 0.0) for r in regrets]
            total = sum(positive)
            self.current[key] = [r / total for r in positive] if total > 0 else [0.5, 0.5]


def _visit(
    tables: _Tables,
    cards: tuple[int, int],
    history: tuple[int, ...],
    reach: tuple[float, float],
    chance: float,
    player: int,
) -> float:
    """Player 0's expected chips below ``history``; updates ``player``'s nodes.

    ``reach`` holds each player's own probability of playing to ``history``;
    ``chance`` the deal's probability (it scales counterfactual regrets as in
    OpenSpiel, which keeps the arithmetic of the two implementations alike).
    """
    if is_terminal_history(history):
        return float(chips_for_player0(cards, history))
    if reach[0] == 0.0 and reach[1] == 0.0:
        return 0.0  # nobody's tables change below here
    actor = len(history) % 2
    key = infoset_key(cards[actor], history)
    policy = tables.current[key]
    child_values = []
    value = 0.0
    for move in MOVES:
        child_reach = (reach[0] * policy[move], reach[1]) if actor == 0 else (reach[0], reach[1] * policy[move])
        child_value = _visit(tables, cards, history + (move,), child_reach, chance, player)
        child_values.append(child_value)
        value += policy[move] * child_value
    if actor == player:
        sign = 1.0 if actor == 0 else -1.0  # zero-sum: player 1 gets -value
        counterfactual_reach = reach[1 - actor] * chance
        for move in MOVES:
            tables.regret[key][move] += counterfactual_reach * sign * (child_values[move] - value)
            tables.policy_sum[key][move] += reach[actor] * policy[move]
    return value


def _run_cfr(iterations: int) -> _Tables:
    tables = _Tables()
    chance = 1.0 / len(DEALS)
    for _ in range(iterations):
        for player in (0, 1):
            for cards in DEALS:
                _visit(tables, cards, (), (1.0, 1.0), chance, player)
            tables.refresh_current()
    return tables


def _check_iterations(iterations: int) -> None:
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1:
        raise ValueError(f"CFR iterations must be a positive integer, got {iterations!r}")


@functools.lru_cache(maxsize=16)
def _average_p_bet(iterations: int) -> tuple[tuple[str, float], ...]:
    tables = _run_cfr(iterations)
    result = []
    for key in ALL_INFOSETS:
        pass_sum, bet_sum = tables.policy_sum[key]
        total = pass_sum + bet_sum
        result.append((key, bet_sum / total if total > 0 else 0.5))
    return tuple(result)


def cfr_average_policy(iterations: int = REFERENCE_ITERATIONS) -> dict[str, float]:
    """P(BET) of the CFR average strategy per infoset (cached per count)."""
    _check_iterations(iterations)
    return dict(_average_p_bet(iterations))


def cfr_strategy(iterations: int = REFERENCE_ITERATIONS) -> BehaviourStrategy:
    """The average strategy played by sampling (name "cfr").

    Probabilities become exact Fractions of the floats, so the analysis module
    measures exactly this strategy.
    """
    p_bet = {key: Fraction(p) for key, p in cfr_average_policy(iterations).items()}
    return BehaviourStrategy("cfr", p_bet)


def cfr_argmax_strategy(iterations: int = REFERENCE_ITERATIONS) -> BehaviourStrategy:
    """The reference code's "CFR": the argmax of the average strategy (name
    "cfr_argmax"); PASS on an exact tie."""
    p_bet = {key: BET if p > 0.5 else PASS for key, p in cfr_average_policy(iterations).items()}
    return BehaviourStrategy("cfr_argmax", p_bet)
