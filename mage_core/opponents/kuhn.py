"""Kuhn Poker opponents as behaviour strategies (docs/method.md sections 7 and 11).

A behaviour strategy gives P(BET) at every information set of BOTH seats, so the
same object can sit in either chair. Information sets use the canonical strings
of ``mage_core.envs.kuhn_poker.rules`` (``"Q"``, ``"Kp"``, ``"Jpb"``, ``"Qb"``).
Probabilities are stored as ``fractions.Fraction`` so the exact analysis
(``mage_core.envs.kuhn_poker.analysis``) stays exact; sampling uses floats.
"""

from __future__ import annotations

import numbers
from fractions import Fraction
from types import MappingProxyType
from typing import Mapping, Union

import numpy as np

from mage_core.envs.base import check_generator
from mage_core.envs.kuhn_poker.rules import (
    ALL_INFOSETS,
    BET,
    INFOSETS_BY_SEAT,
    PASS,
    KuhnState,
)

#: What a probability may be written as: an exact Fraction, 0/1, a float (read
#: as the decimal it prints as: 0.3 -> 3/10) or a string such as "1/3".
Probability = Union[Fraction, int, float, str]


def to_fraction(value: object) -> Fraction:
    """Read a probability-like number exactly; ValueError if it is not a number.

    Floats go through their shortest repr so that a ``0.3`` from params.yaml
    means 3/10 rather than the nearest binary double.
    """
    if isinstance(value, bool) or value is None:
        raise ValueError(f"expected a number, got {value!r}")
    if isinstance(value, Fraction):
        return value
    if isinstance(value, numbers.Integral):
        return Fraction(int(value))
    if isinstance(value, numbers.Real):
        text = repr(float(value))
    elif isinstance(value, str):
        text = value.strip()
    else:
        raise ValueError(f"expected a number, got {type(value).__name__} {value!r}")
    try:
        return Fraction(text)
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"expected a finite number or a fraction like '1/3', got {value!r}") from None


def validate_behaviour(p_bet: object) -> list[str]:
    """Every problem with a P(BET) table, as messages naming the infoset.

    Used by the config loader for user-defined archetypes in params.yaml, so it
    reports all errors at once instead of stopping at the first.
    """
    if not isinstance(p_bet, Mapping):
        return [f"p_bet must be a mapping from information set to P(BET), got {type(p_bet).__name__}"]
    errors: list[str] = []
    valid = ", ".join(ALL_INFOSETS)
    for key, value in p_bet.items():
        if key not in ALL_INFOSETS:
            errors.append(f"unknown information set {key!r}; valid ones: {valid}")
            continue
        try:
            probability = to_fraction(value)
        except ValueError as error:
            errors.append(f"{key}: P(BET) {error}")
            continue
        if not 0 <= probability <= 1:
            errors.append(f"{key}: P(BET) must be in [0, 1], got {value!r}")
    missing = [key for key in ALL_INFOSETS if key not in p_bet]
    if missing:
        errors.append(
            f"missing information sets: {', '.join(missing)} (give P(BET) for every "
            f"infoset of both seats: seat 0 {', '.join(INFOSETS_BY_SEAT[0])}; "
            f"seat 1 {', '.join(INFOSETS_BY_SEAT[1])})"
        )
    return errors


class BehaviourStrategy:
    """A stationary Kuhn Poker player: P(BET) per information set, both seats.

    Implements the ``Opponent`` protocol. It only reads ``state.infoset(player)``
    (own card + betting), never the other card.
    """

    def __init__(self, name: str, p_bet: Mapping[str, Probability]) -> None:
        errors = validate_behaviour(p_bet)
        if errors:
            raise ValueError(f"behaviour strategy {name!r}: " + "; ".join(errors))
        self.name = name
        self.p_bet: Mapping[str, Fraction] = MappingProxyType(
            {key: to_fraction(p_bet[key]) for key in ALL_INFOSETS}
        )

    def __reduce__(self) -> tuple:
        # The read-only view does not pickle; rebuild from a plain dict (finished
        # meta-episodes travel back from rollout workers with their env and opponent).
        return (type(self), (self.name, dict(self.p_bet)))

    def probability_of_bet(self, infoset: str) -> Fraction:
        if infoset not in self.p_bet:
            raise ValueError(f"unknown information set {infoset!r}; valid ones: {', '.join(ALL_INFOSETS)}")
        return self.p_bet[infoset]

    @property
    def is_deterministic(self) -> bool:
        return all(p in (0, 1) for p in self.p_bet.values())

    def act(self, state: KuhnState, rng: np.random.Generator) -> int:
        """PASS or BET at ``state``; draws from ``rng`` only for mixed infosets."""
        if not isinstance(state, KuhnState):
            raise TypeError(f"{self.name} plays Kuhn Poker states, got {type(state).__name__}")
        check_generator(rng, f"{self.name}.act")
        if state.is_terminal():
            raise ValueError(f"{self.name}: the hand {state.history_string()!r} is over")
        probability = self.p_bet[state.infoset(state.to_move)]
        if probability == 0:
            return PASS
        if probability == 1:
            return BET
        return BET if rng.random() < float(probability) else PASS

    def seat_table(self, seat: int) -> dict[str, Fraction]:
        """P(BET) at the infosets of one seat only."""
        if seat not in INFOSETS_BY_SEAT:
            raise ValueError(f"seat must be 0 or 1, got {seat!r}")
        return {key: self.p_bet[key] for key in INFOSETS_BY_SEAT[seat]}

    def __repr__(self) -> str:
        table = ", ".join(f"{key}={p}" for key, p in self.p_bet.items())
        return f"BehaviourStrategy({self.name!r}, {table})"


# The archetypes of docs/method.md section 7, identical in both seats (as in the
# reference code, which reads only the card and whether a bet was made). Rows:
# seat 0 opening (J, Q, K) and answering a check-bet (Jpb, Qpb, Kpb); seat 1
# after a check (Jp, Qp, Kp) and facing a bet (Jb, Qb, Kb).
ARCHETYPES: dict[str, BehaviourStrategy] = {
    # Bets or calls only with K; otherwise checks or folds.
    "conservative": BehaviourStrategy("conservative", {
        "J": 0, "Q": 0, "K": 1, "Jpb": 0, "Qpb": 0, "Kpb": 1,
        "Jp": 0, "Qp": 0, "Kp": 1, "Jb": 0, "Qb": 0, "Kb": 1,
    }),
    # With no bet yet always bets; facing a bet folds J, calls Q and K (as seat 0
    # it never checks, so Jpb/Qpb/Kpb are never reached but defined the same way).
    "aggressive": BehaviourStrategy("aggressive", {
        "J": 1, "Q": 1, "K": 1, "Jpb": 0, "Qpb": 1, "Kpb": 1,
        "Jp": 1, "Qp": 1, "Kp": 1, "Jb": 0, "Qb": 1, "Kb": 1,
    }),
    # K bets/calls; J checks/folds; Q bets when no bet yet and folds to a bet.
    "intermediate": BehaviourStrategy("intermediate", {
        "J": 0, "Q": 1, "K": 1, "Jpb": 0, "Qpb": 0, "Kpb": 1,
        "Jp": 0, "Qp": 1, "Kp": 1, "Jb": 0, "Qb": 0, "Kb": 1,
    }),
}


# Playing styles (issue 29): the corners of the strategy space that the ``diverse`` training
# prior mixes (``kuhn_families`` prior ``styles``), none of them a paper archetype, so that the
# archetypes stay held out. Each is one fixed style in both seats.
STYLES: dict[str, BehaviourStrategy] = {
    # Bets whenever it may and calls every bet: value and bluff alike.
    "maniac": BehaviourStrategy("maniac", {key: 1 for key in ("J", "Q", "K", "Jpb", "Qpb", "Kpb",
                                                               "Jp", "Qp", "Kp", "Jb", "Qb", "Kb")}),
    # Never bets, calls every bet: it pays off anything and never bluffs.
    "station": BehaviourStrategy("station", {
        "J": 0, "Q": 0, "K": 0, "Jpb": 1, "Qpb": 1, "Kpb": 1,
        "Jp": 0, "Qp": 0, "Kp": 0, "Jb": 1, "Qb": 1, "Kb": 1,
    }),
    # Bets its best and its worst card (K for value, J as a bluff), checks Q; calls only with K.
    "polar_bluffer": BehaviourStrategy("polar_bluffer", {
        "J": 1, "Q": 0, "K": 1, "Jpb": 0, "Qpb": 0, "Kpb": 1,
        "Jp": 1, "Qp": 0, "Kp": 1, "Jb": 0, "Qb": 0, "Kb": 1,
    }),
    # Never bets first, even with K (it slow-plays), and calls with Q and K: a check hides its hand.
    "trapper": BehaviourStrategy("trapper", {
        "J": 0, "Q": 0, "K": 0, "Jpb": 0, "Qpb": 1, "Kpb": 1,
        "Jp": 0, "Qp": 0, "Kp": 0, "Jb": 0, "Qb": 1, "Kb": 1,
    }),
}


# The exploration pair (issue 15): two opponents that open alike (check J; bet Q
# and K first or after a check) and differ ONLY in how they answer a bet: the
# tight caller calls with K alone, the calling station calls with anything. An
# agent that never bets never sees the difference; one that bets early to find
# out can bluff the tight caller and value-bet the station. Played as the
# population preset ``probe`` (the agent always first to act), where deliberate
# probing is worth 17/54 - 7/27 = 1/18 chips of the final hand of 3 (fresh deals)
# over "play the best fixed strategy, then respond" (``analysis.passive_meta_value``).
_PROBE_OPENING = {"J": 0, "Q": 1, "K": 1, "Jp": 0, "Qp": 1, "Kp": 1}
PROBES: dict[str, BehaviourStrategy] = {
    "tight_caller": BehaviourStrategy("tight_caller", {
        **_PROBE_OPENING, "Jpb": 0, "Qpb": 0, "Kpb": 1, "Jb": 0, "Qb": 0, "Kb": 1}),
    "calling_station": BehaviourStrategy("calling_station", {
        **_PROBE_OPENING, "Jpb": 1, "Qpb": 1, "Kpb": 1, "Jb": 1, "Qb": 1, "Kb": 1}),
}


def archetype(name: str) -> BehaviourStrategy:
    """An archetype by name; a bad name lists the valid ones."""
    if name not in ARCHETYPES:
        raise ValueError(f"unknown Kuhn archetype {name!r}; valid: {', '.join(ARCHETYPES)}")
    return ARCHETYPES[name]


def uniform_random(name: str = "random") -> BehaviourStrategy:
    """P(BET) = 1/2 everywhere: the uniform-random player as a behaviour
    strategy, so the exact analysis can measure it too."""
    return BehaviourStrategy(name, {key: Fraction(1, 2) for key in ALL_INFOSETS})


def equilibrium(alpha: Probability = Fraction(0)) -> BehaviourStrategy:
    """The Nash equilibrium family of docs/method.md section 11, for both seats.

    Seat 0: J bets w.p. alpha, Q checks and calls a check-bet w.p. alpha + 1/3,
    K bets w.p. 3 alpha and always calls. Seat 1 (unique): after a check bets K,
    checks Q, bluffs J w.p. 1/3; facing a bet calls K, calls Q w.p. 1/3, folds J.
    Every member gives player 0 the game value -1/18.
    """
    a = to_fraction(alpha)
    if not 0 <= a <= Fraction(1, 3):
        raise ValueError(f"equilibrium alpha must be in [0, 1/3], got {alpha!r}")
    third = Fraction(1, 3)
    return BehaviourStrategy(f"equilibrium(alpha={a})", {
        "J": a, "Q": 0, "K": 3 * a, "Jpb": 0, "Qpb": a + third, "Kpb": 1,
        "Jp": third, "Qp": 0, "Kp": 1, "Jb": 0, "Qb": third, "Kb": 1,
    })
