"""Exact Kuhn Poker ceilings of an evaluation suite (docs/method.md section 11).

A suite is a weighted set of (opponent, agent seat) pairs. For the opponents it
holds, with their weights, the final hand of a K-hand meta-episode is bounded by
exact values that depend only on the suite and the deal protocol:

- ``best_fixed``: the best single fixed strategy, the same against every
  opponent (no adaptation at all);
- ``passive``: "play fixed, then respond": the best fixed strategy in every hand
  but the last, then the best response to what those hands revealed (adaptation
  without deliberate probing; ``analysis.passive_meta_value``);
- ``adaptive``: the Bayes-optimal agent, whose earlier hands may probe
  (``analysis.bayes_optimal_meta_value``); no agent's final hand earns more;
- ``known``: the opponent's identity given for free (each opponent's best
  response).

Under early stop (``rollout.early_stop``: a won hand ends the meta-episode and
its chips stand for every later hand) the reported final hand is the last hand
PLAYED, so the ceilings are those of that protocol: ``adaptive`` is the
Bayes-optimal stopping agent (``analysis.bayes_optimal_meta_value`` with
``early_stop``), ``known`` the same with the opponent's type given; ``best_fixed``
and ``passive`` are not computed there (the best fixed strategy of a stopped
meta-episode is not the one-hand best response, and no exact solver for it is
built): they are ``None`` and never written.

``best_fixed <= passive <= adaptive``, and with fresh deals ``adaptive <= known``
(a replayed deal lets probing reveal the opponent's card too, so there the
Bayes-optimal agent may beat "known"); final-hand chips above ``best_fixed`` are
earned by adaptation, and ``adaptive - passive`` is what deliberate exploration
is worth in this suite. Each value is seat-weighted by the
suite's own (opponent, seat) probabilities, so it is the ceiling of the suite's
``all`` figure. ``mage evaluate`` writes them next to every suite's figures
(``ceiling_<name>`` in the ``all`` group, with the per-opponent figures of
``suite_figures``: the task's ``TaskExact.suite``); the report and the ablation summary
print them next to every Kuhn number.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Callable, Mapping, Sequence

from mage_core.envs.kuhn_poker import analysis
from mage_core.envs.kuhn_poker.exact_greedy import SEAT_NAMES
from mage_core.opponents.kuhn import BehaviourStrategy
from mage_core.opponents.population import Population, PopulationEntry
from mage_core.opponents.registry import OpponentSettings, make_opponent

#: The ceilings in increasing order, with what each stands for (report legends).
CEILINGS: dict[str, str] = {
    "best_fixed": "best fixed strategy (no adaptation)",
    "passive": "play fixed, then respond (no probing)",
    "adaptive": "Bayes-optimal final hand",
    "known": "opponent known",
}
#: Beyond this many hands the Bayes solver's time grows quickly (its belief tree
#: doubles per hand); ``mage evaluate`` leaves the ceilings out and says so.
MAX_EXACT_HANDS = 4
#: A stand-in seat weight, exact to six digits (population weights are floats).
_DENOMINATOR = 10**6

SeatMix = list[tuple[Fraction, BehaviourStrategy]]


@dataclass(frozen=True)
class SuiteCeilings:
    """A suite's exact final-hand ceilings, chips per hand (module docstring)."""

    num_hands: int
    restart: str
    early_stop: bool
    best_fixed: Fraction | None  # None: not computed under early stop (module docstring)
    passive: Fraction | None
    adaptive: Fraction
    known: Fraction

    def values(self) -> dict[str, Fraction]:
        """The ceilings computed for this protocol, by name (``CEILINGS`` order)."""
        return {name: value for name in CEILINGS if (value := getattr(self, name)) is not None}


def behaviour(name: str, settings: OpponentSettings) -> BehaviourStrategy:
    """A Kuhn opponent by name (every Kuhn opponent is a behaviour strategy)."""
    opponent = make_opponent("kuhn_poker", name, settings)
    if not isinstance(opponent, BehaviourStrategy):
        raise TypeError(f"Kuhn opponent {name!r} is a {type(opponent).__name__}, not a BehaviourStrategy")
    return opponent


def seat_mixes(probabilities: Mapping[tuple[str, int], float], strategy: Callable[[str], BehaviourStrategy]
               ) -> dict[int, tuple[Fraction, SeatMix]]:
    """Agent seat -> (probability of the seat, opponent mix given the seat), exact
    from a suite's (opponent, seat) probabilities; ``strategy`` gives an opponent by name."""
    probs = {key: Fraction(p).limit_denominator(_DENOMINATOR) for key, p in probabilities.items()}
    out = {}
    for seat in (0, 1):
        pairs = [(p, name) for (name, s), p in sorted(probs.items()) if s == seat and p > 0]
        p_seat = sum((p for p, _ in pairs), Fraction(0))
        if p_seat > 0:
            out[seat] = (p_seat, [(p / p_seat, strategy(name)) for p, name in pairs])
    return out


def population_mixes(entries: Sequence[PopulationEntry], settings: OpponentSettings
                     ) -> dict[int, tuple[Fraction, SeatMix]]:
    """``seat_mixes`` of a population's entries, opponents built from ``settings``."""
    return seat_mixes(Population(list(entries)).probabilities(), lambda name: behaviour(name, settings))


def _measures(num_hands: int, restart: str, early_stop: bool) -> dict[str, Callable[[SeatMix, int], Fraction]]:
    """The ceilings computed under a protocol (module docstring), by name."""
    adaptive = {
        "adaptive": lambda mix, seat: analysis.bayes_optimal_meta_value(  # type: ignore[arg-type]
            mix, num_hands, restart, seat, early_stop),
        "known": lambda mix, seat: analysis.known_meta_value(mix, num_hands, restart, seat, early_stop),  # type: ignore[arg-type]
    }
    if early_stop:
        return adaptive
    return {
        "best_fixed": lambda mix, seat: analysis.best_response(mix, seat)[0],
        "passive": lambda mix, seat: analysis.passive_meta_value(mix, num_hands, restart, seat),  # type: ignore[arg-type]
        **adaptive,
    }


def mix_ceilings(mixes: Mapping[int, tuple[Fraction, SeatMix]], num_hands: int, restart: str,
                 early_stop: bool = False) -> SuiteCeilings:
    """The seat-weighted ceilings of ``seat_mixes`` output."""
    measures = _measures(num_hands, restart, early_stop)
    totals: dict[str, Fraction | None] = {name: None for name in CEILINGS}
    for name, fn in measures.items():
        totals[name] = sum((p_seat * fn(mix, seat) for seat, (p_seat, mix) in sorted(mixes.items())), Fraction(0))
    return SuiteCeilings(num_hands, restart, early_stop, **totals)  # type: ignore[arg-type]


@functools.lru_cache(maxsize=64)
def _cached(pairs: tuple[tuple[tuple[str, int], float], ...], tables: tuple[tuple[str, tuple], ...],
            num_hands: int, restart: str, early_stop: bool) -> SuiteCeilings:
    strategies = {name: BehaviourStrategy(name, dict(table)) for name, table in tables}
    return mix_ceilings(seat_mixes(dict(pairs), strategies.__getitem__), num_hands, restart, early_stop)


def suite_ceilings(entries: Sequence[PopulationEntry], settings: OpponentSettings, num_hands: int,
                   restart: str, early_stop: bool = False) -> SuiteCeilings:
    """The ceilings of a suite of Kuhn opponents (its population entries) for
    ``num_hands`` hands with ``restart`` deals, under early stop or not. Cached on
    the opponents' tables, so suites of one process that share their opponents are
    solved once."""
    if not 1 <= num_hands <= MAX_EXACT_HANDS:
        raise ValueError(f"exact Kuhn ceilings are computed for 1..{MAX_EXACT_HANDS} hands, got {num_hands}")
    probabilities = Population(list(entries)).probabilities()
    names = sorted({name for name, _ in probabilities})
    tables = tuple((name, tuple(sorted(behaviour(name, settings).p_bet.items()))) for name in names)
    return _cached(tuple(sorted(probabilities.items())), tables, num_hands, restart, early_stop)


def ceiling_metrics(ceilings: SuiteCeilings) -> dict[str, float]:
    """``all/ceiling_<name>`` figures for a suite's metrics (the ceilings its protocol has)."""
    return {f"all/ceiling_{name}": float(value) for name, value in ceilings.values().items()}


def suite_figures(entries: Sequence[PopulationEntry], weights: Mapping[tuple[str, int], float],
                  settings: OpponentSettings, k: int, restart: str, early_stop: bool,
                  say: Callable[[str], Any] = print) -> tuple[dict[str, float], dict[str, float]]:
    """Exact figures a Kuhn suite's chips are read against, for ``k`` hands with ``restart``
    deals, with or without early stop (``Task.exact_values.suite``):

    - ``all/ceiling_*``: the suite's ceilings (beyond ``MAX_EXACT_HANDS`` hands left out, and
      ``say`` tells why);
    - per (opponent, seat): ``best_response_value`` (one hand) and ``ceiling_known`` (the
      final hand with the opponent known, under the suite's protocol: the best response
      without early stop).

    And, for ``all`` and each group, what an equilibrium strategy secures in its seats (the
    game's value, -1/18 first, +1/18 second): an opponent is exploitable only by what the
    ceiling adds to it. Against CFR as second player the ceiling is the game value +1/18
    itself (plus ~1e-4 of residual exploitability), and a ratio to it would read a chip
    figure against nothing exploitable. ``weights``: the suite's (opponent, seat)
    probabilities (``Suite.weights``)."""
    out: dict[str, float] = {}
    if k <= MAX_EXACT_HANDS:
        out.update(ceiling_metrics(suite_ceilings(entries, settings, k, restart, early_stop)))
    else:
        say(f"no exact ceilings for {k} hands (computed up to {MAX_EXACT_HANDS}; "
            f"`mage kuhn analyze --meta-hands {k}` computes them without a limit)")
    groups = [(f"{opponent}/{SEAT_NAMES[seat]}", opponent, seat) for opponent, seat in sorted(weights)]
    for group, opponent, seat in groups:
        strategy = [(1, behaviour(opponent, settings))]
        out[f"{group}/best_response_value"] = float(analysis.best_response(strategy, seat)[0])
        out[f"{group}/ceiling_known"] = float(analysis.known_meta_value(strategy, k, restart, seat,  # type: ignore[arg-type]
                                                                          early_stop))
    total = sum(weights.values()) or 1.0
    secured = {"all": sum(w * float(analysis.seat_value(seat)) for (_, seat), w in weights.items()) / total}
    secured.update({group: float(analysis.seat_value(seat)) for group, _, seat in groups})
    return out, secured
