"""Exact Kuhn Poker analysis with fractions (docs/method.md sections 8 and 11).

Everything is exact rational arithmetic over the 6 equally likely deals, so the
reference facts of section 11 can be asserted with ``==``:

- ``expected_value``: chips per hand of one strategy against another;
- ``best_response``: the best single fixed (pure) strategy against a weighted
  mix of opponents - the mix is a chance node that picks the opponent type, which
  the agent never sees. A mix of one gives the per-opponent best response;
- ``bayes_optimal_meta_value``: the ceiling of a MAGE meta-episode (only the
  final hand counts) for an agent that learns the opponent's type from what it
  may see: its own cards, the betting, the opponent's card at showdown only;
- ``passive_meta_value`` / ``fixed_then_respond_value`` / ``open_loop_meta_value``:
  the same final hand for an agent that plays a fixed strategy until then (the
  best fixed one: no probing; any one: probing planned in advance);
- ``exploitability``, ``format_fraction`` and plain-data reports for the CLI.

Strategies are read through their P(BET) tables: a ``BehaviourStrategy`` or any
mapping from infoset string to probability (e.g. the pure strategy returned by
``best_response``) works as the agent. The expectimax across hands behind the
meta-episode values is ``meta_solver``'s.
"""

from __future__ import annotations

import itertools
from fractions import Fraction
from typing import Callable, Mapping, Sequence, Union

from mage_core.envs.kuhn_poker.meta_solver import (
    ONE_SIXTH,
    MetaSolver,
    Restart,
    agent_chips,
    move_probability,
    solve,
)
from mage_core.envs.kuhn_poker.rules import (
    BET,
    DEALS,
    INFOSETS_BY_SEAT,
    MOVE_NAMES,
    MOVES,
    PASS,
    chips_for_player0,
    infoset_key,
    is_terminal_history,
)
from mage_core.opponents.kuhn import BehaviourStrategy, to_fraction

Strategy = Union[BehaviourStrategy, Mapping[str, object]]
OpponentMix = Sequence[tuple[object, BehaviourStrategy]]


def _check_seat(agent_seat: int) -> int:
    if agent_seat not in (0, 1):
        raise ValueError(f"agent_seat must be 0 or 1, got {agent_seat!r}")
    return agent_seat


def _table(strategy: Strategy, seat: int, who: str) -> dict[str, Fraction]:
    """P(BET) at ``seat``'s infosets, exact; missing infosets are an error."""
    p_bet = strategy.p_bet if isinstance(strategy, BehaviourStrategy) else strategy
    if not isinstance(p_bet, Mapping):
        raise ValueError(f"{who} must be a BehaviourStrategy or a mapping infoset -> P(BET)")
    missing = [key for key in INFOSETS_BY_SEAT[seat] if key not in p_bet]
    if missing:
        raise ValueError(f"{who} has no P(BET) for seat {seat} infosets {', '.join(missing)}")
    table = {key: to_fraction(p_bet[key]) for key in INFOSETS_BY_SEAT[seat]}
    outside = [key for key, p in table.items() if not 0 <= p <= 1]
    if outside:
        raise ValueError(f"{who} has P(BET) outside [0, 1] at {', '.join(outside)}")
    return table


def _normalised_mix(opponent_mix: OpponentMix) -> list[tuple[Fraction, BehaviourStrategy]]:
    """Weights as exact fractions summing to 1 (any positive total is accepted)."""
    if len(opponent_mix) == 0:
        raise ValueError("opponent_mix is empty: give at least one (weight, strategy) pair")
    pairs = []
    for index, (weight, strategy) in enumerate(opponent_mix):
        exact = to_fraction(weight)
        if exact < 0:
            raise ValueError(f"opponent_mix[{index}] has a negative weight {weight!r}")
        if not isinstance(strategy, BehaviourStrategy):
            raise ValueError(f"opponent_mix[{index}] must pair a weight with a BehaviourStrategy")
        pairs.append((exact, strategy))
    total = sum(weight for weight, _ in pairs)
    if total == 0:
        raise ValueError("opponent_mix weights sum to 0")
    return [(weight / total, strategy) for weight, strategy in pairs]


# --------------------------------------------------------------------------- #
# Expected value and best response


def expected_value(agent: Strategy, opponent: Strategy, agent_seat: int) -> Fraction:
    """The agent's expected chips per hand, averaged over the 6 deals."""
    seat = _check_seat(agent_seat)
    tables = {seat: _table(agent, seat, "agent"), 1 - seat: _table(opponent, 1 - seat, "opponent")}

    def value(cards: tuple[int, int], history: tuple[int, ...]) -> Fraction:
        if is_terminal_history(history):
            chips = chips_for_player0(cards, history)
            return Fraction(chips if seat == 0 else -chips)
        actor = len(history) % 2
        p_bet = tables[actor][infoset_key(cards[actor], history)]
        total = Fraction(0)
        for move in MOVES:
            probability = move_probability(p_bet, move)
            if probability:
                total += probability * value(cards, history + (move,))
        return total

    return sum((value(cards, ()) for cards in DEALS), Fraction(0)) * ONE_SIXTH


#: A "world" the agent cannot tell apart: (probability weight, opponent P(BET)
#: table, opponent card). The weight includes the opponent's reach so far.
_World = tuple[Fraction, dict[str, Fraction], int]


def _opponent_branch(worlds: list[_World], history: tuple[int, ...], move: int) -> list[_World]:
    return [
        (weight * move_probability(table[infoset_key(card, history)], move), table, card)
        for weight, table, card in worlds
    ]


def best_response(opponent_mix: OpponentMix, agent_seat: int) -> tuple[Fraction, dict[str, int]]:
    """The best single fixed strategy against a mix of opponents, and its value.

    The agent does not see which opponent it faces (the mix is a chance node),
    so one backward induction over the agent's own infosets weighs every
    (opponent type, opponent card) world by prior x reach. Returns the expected
    chips per hand and the pure strategy {infoset: PASS or BET} over all 6
    infosets of the agent's seat (unreached ones included; ties go to PASS).
    """
    value, choices, _ = best_response_details(opponent_mix, agent_seat)
    return value, choices


def best_response_details(
    opponent_mix: OpponentMix, agent_seat: int
) -> tuple[Fraction, dict[str, int], set[str]]:
    """``best_response`` plus the infosets where both actions are worth the
    same (unreached ones included): there the PASS choice is arbitrary."""
    seat = _check_seat(agent_seat)
    mix = [(weight, _table(strategy, 1 - seat, strategy.name)) for weight, strategy in _normalised_mix(opponent_mix)]
    choices: dict[str, int] = {}
    indifferent: set[str] = set()

    def node(card: int, history: tuple[int, ...], worlds: list[_World]) -> Fraction:
        if is_terminal_history(history):
            return sum((w * agent_chips(card, o, seat, history) for w, _, o in worlds), Fraction(0))
        if len(history) % 2 == seat:
            values = [node(card, history + (move,), worlds) for move in MOVES]
            best = BET if values[BET] > values[PASS] else PASS
            choices[infoset_key(card, history)] = best
            if values[BET] == values[PASS]:
                indifferent.add(infoset_key(card, history))
            return values[best]
        return sum((node(card, history + (m,), _opponent_branch(worlds, history, m)) for m in MOVES), Fraction(0))

    total = Fraction(0)
    for card in range(3):
        worlds = [(w * ONE_SIXTH, table, o) for w, table in mix for o in range(3) if o != card]
        total += node(card, (), worlds)
    return total, {key: choices[key] for key in INFOSETS_BY_SEAT[seat]}, indifferent


def exploitability(strategy: Strategy) -> Fraction:
    """How much a best responder wins from ``strategy`` playing both seats:
    (BR value as seat 0 + BR value as seat 1) / 2, i.e. NashConv / 2 (the game
    value cancels between the seats); exactly 0 at an equilibrium."""
    as_behaviour = strategy if isinstance(strategy, BehaviourStrategy) else BehaviourStrategy("strategy", strategy)
    seat0_gain, _ = best_response([(1, as_behaviour)], 0)
    seat1_gain, _ = best_response([(1, as_behaviour)], 1)
    return (seat0_gain + seat1_gain) / 2


def seat_value(agent_seat: int) -> Fraction:
    """The game's value for the player in ``agent_seat`` (docs/method.md section 11): -1/18
    first to act, +1/18 second. What any equilibrium strategy secures there, so a best
    response earns only its surplus over it from the opponent's mistakes."""
    return Fraction(-1, 18) if _check_seat(agent_seat) == 0 else Fraction(1, 18)


def mean_over_seats(value_of_seat: Callable[[int], Fraction]) -> Fraction:
    """The seat average (docs/method.md section 11 tables: seats mixed 50/50)."""
    return (value_of_seat(0) + value_of_seat(1)) / 2


def type_known_value(opponent_mix: OpponentMix, agent_seat: int) -> Fraction:
    """Prior-weighted best-response value when the agent knows the type."""
    return sum(
        (weight * best_response([(1, strategy)], agent_seat)[0] for weight, strategy in _normalised_mix(opponent_mix)),
        Fraction(0),
    )


# --------------------------------------------------------------------------- #
# Bayes-optimal meta-episode value (MAGE's objective: the final hand only)


_RESTARTS: dict[str, str] = {
    "fresh": "a new deal each hand, same opponent",
    "same": "the first hand's deal replayed every hand (reference code)",
}


def bayes_optimal_meta_value(
    opponent_mix: OpponentMix, num_hands: int, restart: Restart, agent_seat: int, early_stop: bool = False
) -> Fraction:
    """The best expected chips of the FINAL hand of a ``num_hands``-hand
    meta-episode against one opponent drawn once from the mix (docs/method.md sections 1, 11).

    Earlier hands earn nothing but information: the agent sees its own cards,
    the betting, and the opponent's card at showdown (never on a fold), and its
    belief over the opponent's type (and, with ``restart="same"``, over the
    opponent's fixed card) is the exact posterior. Stochastic opponents are
    handled: their actions are re-drawn every hand. ``num_hands=1`` gives the
    best fixed strategy's value.

    ``early_stop`` (``rollout.early_stop``, the paper's protocol): a won hand ends
    the meta-episode, and its chips count as the final hand's (the evaluation
    carries a stopped meta-episode's last hand to the later indices). The agent
    then maximises the chips of the LAST hand it plays: a won hand before the
    last is worth its own chips, a lost one continues with the updated belief.
    This is the ceiling of the figures reported under that protocol.
    """
    return _meta_value(opponent_mix, num_hands, restart, agent_seat, None, early_stop)


def known_meta_value(opponent_mix: OpponentMix, num_hands: int, restart: Restart, agent_seat: int,
                     early_stop: bool) -> Fraction:
    """The opponent known, under the meta-episode's protocol: without early stop the
    prior-weighted best-response value (``type_known_value``: every hand is played
    and only the last counts, so knowing the type is worth its best response in
    it); with early stop each type's own ``bayes_optimal_meta_value`` (the
    opponent's type known, its cards not), weighted by the prior."""
    if not early_stop:
        return type_known_value(opponent_mix, agent_seat)
    return sum((weight * bayes_optimal_meta_value([(1, strategy)], num_hands, restart, agent_seat, True)
                for weight, strategy in _normalised_mix(opponent_mix)), Fraction(0))


def _meta_value(opponent_mix: OpponentMix, num_hands: int, restart: Restart, agent_seat: int,
                fixed: Mapping[str, int] | None, early_stop: bool = False) -> Fraction:
    seat = _check_meta(agent_seat, num_hands, restart)
    mix = _normalised_mix(opponent_mix)
    tables = [_table(strategy, 1 - seat, strategy.name) for _, strategy in mix]
    solver = MetaSolver(lambda t, key: tables[t][key], seat, restart, fixed, early_stop=early_stop)  # type: ignore[index]
    return solve(solver, [(t, weight) for t, (weight, _) in enumerate(mix)], num_hands, restart)


def _check_meta(agent_seat: int, num_hands: int, restart: str) -> int:
    seat = _check_seat(agent_seat)
    if restart not in _RESTARTS:
        valid = "; ".join(f"{name!r} ({meaning})" for name, meaning in _RESTARTS.items())
        raise ValueError(f"restart must be one of {valid}, got {restart!r}")
    if isinstance(num_hands, bool) or not isinstance(num_hands, int) or num_hands < 1:
        raise ValueError(f"num_hands must be a positive integer, got {num_hands!r}")
    return seat


# --------------------------------------------------------------------------- #
# A continuous prior: every P(BET) drawn from Beta(alpha, beta)


def _beta_parameters(alpha: object, beta: object) -> tuple[Fraction, Fraction]:
    a, b = to_fraction(alpha), to_fraction(beta)
    if a <= 0 or b <= 0:
        raise ValueError(f"Beta prior parameters must be > 0, got alpha={alpha!r}, beta={beta!r}")
    return a, b


def beta_prior_meta_value(alpha: object, beta: object, num_hands: int, restart: Restart, agent_seat: int,
                          fixed: Mapping[str, int] | None = None) -> Fraction:
    """The Bayes-optimal final hand against an opponent whose P(BET) at each of its
    six information sets is drawn once per meta-episode, independently, from
    Beta(``alpha``, ``beta``) (the prior of ``opponents.kuhn_families``, without
    its rounding or its finite count): exact, because the posterior after any
    observed moves is again a product of Betas (a mixture of them until a
    showdown reveals the card), so a belief is the counts of bets and passes seen
    at each infoset. ``num_hands=1`` gives the best fixed strategy's value (the
    best response to the mean strategy); ``fixed``: play that pure strategy in
    every hand but the last (``fixed_then_respond_value``)."""
    seat = _check_meta(agent_seat, num_hands, restart)
    a, b = _beta_parameters(alpha, beta)
    index = {key: i for i, key in enumerate(INFOSETS_BY_SEAT[1 - seat])}

    def p_bet(counts: object, key: str) -> Fraction:
        i = index[key]
        bets, passes = counts[2 * i], counts[2 * i + 1]  # type: ignore[index]
        return (a + bets) / (a + b + bets + passes)

    def after(counts: object, key: str, move: int) -> object:
        seen = list(counts)  # type: ignore[call-overload]
        seen[2 * index[key] + (0 if move == BET else 1)] += 1
        return tuple(seen)

    solver = MetaSolver(p_bet, seat, restart, fixed, after)
    return solve(solver, [((0,) * 12, Fraction(1))], num_hands, restart)


def beta_prior_mean_strategy(alpha: object, beta: object) -> BehaviourStrategy:
    """P(BET) = alpha / (alpha + beta) everywhere: a fixed strategy earns against
    the Beta prior exactly what it earns against this one (chips are linear in
    each infoset's P(BET), and the infosets are drawn independently)."""
    a, b = _beta_parameters(alpha, beta)
    return BehaviourStrategy(f"beta({a},{b}) mean", {key: a / (a + b) for key in INFOSETS_BY_SEAT[0] + INFOSETS_BY_SEAT[1]})


def beta_prior_passive_value(alpha: object, beta: object, num_hands: int, restart: Restart, agent_seat: int
                             ) -> Fraction:
    """``passive_meta_value`` under the Beta prior (best fixed = best response to the mean strategy)."""
    mean = [(1, beta_prior_mean_strategy(alpha, beta))]
    return max(beta_prior_meta_value(alpha, beta, num_hands, restart, agent_seat, fixed)
               for fixed in best_fixed_strategies(mean, agent_seat))


def sampled_known_value(draw: Callable[[int], BehaviourStrategy], samples: int, agent_seat: int
                        ) -> tuple[float, float]:
    """Monte Carlo "opponent known" ceiling of a prior that has no finite support:
    the mean of the best-response value over ``samples`` opponents ``draw(i)``
    (i = 0, 1, ...), and its standard error. On a finite prior (``draw`` picking
    members by their weight) it estimates ``type_known_value``."""
    if samples < 2:
        raise ValueError(f"samples must be at least 2 for a standard error, got {samples}")
    values = [float(best_response([(1, draw(i))], agent_seat)[0]) for i in range(samples)]
    mean = sum(values) / samples
    variance = sum((v - mean) ** 2 for v in values) / (samples - 1)
    return mean, (variance / samples) ** 0.5


def fixed_then_respond_value(opponent_mix: OpponentMix, num_hands: int, restart: Restart, agent_seat: int,
                             fixed: Mapping[str, int]) -> Fraction:
    """The final hand's best expected chips for an agent that plays the pure
    strategy ``fixed`` (infoset -> PASS 0 / BET 1 at the agent seat's six
    infosets) in every hand but the last, whatever it sees, and then the best
    response to its exact posterior. Its earlier hands gather only the evidence
    ``fixed`` happens to reveal: no deliberate probing, no adapting on the way."""
    seat = _check_seat(agent_seat)
    missing = [key for key in INFOSETS_BY_SEAT[seat] if key not in fixed]
    if missing:
        raise ValueError(f"fixed strategy has no move at seat {seat} infosets {', '.join(missing)}")
    bad = [key for key in INFOSETS_BY_SEAT[seat] if fixed[key] not in MOVES]
    if bad:
        raise ValueError(f"fixed strategy moves must be 0 (PASS) or 1 (BET); not at {', '.join(bad)}")
    return _meta_value(opponent_mix, num_hands, restart, seat, fixed)


def best_fixed_strategies(opponent_mix: OpponentMix, agent_seat: int) -> list[dict[str, int]]:
    """Pure strategies that earn the best fixed value against the mix: the best
    response with each indifferent infoset's choice either way. A strategy that
    differs from these only where its own earlier move never leads (J bets, so
    its answer after checking J is never played) plays alike and is not listed."""
    _, choices, indifferent = best_response_details(opponent_mix, agent_seat)
    free = [key for key in INFOSETS_BY_SEAT[agent_seat] if key in indifferent]
    out = []
    for moves in itertools.product(MOVES, repeat=len(free)):
        out.append({**choices, **dict(zip(free, moves))})
    return out


def passive_meta_value(opponent_mix: OpponentMix, num_hands: int, restart: Restart, agent_seat: int) -> Fraction:
    """The final hand of a "play fixed, then respond" agent that plays, until the
    last hand, the best fixed strategy against the prior (the non-adaptive
    agent's play: no hand spent on probing), then best-responds to its posterior.
    Where several strategies tie for best fixed, the most informative one counts
    (the maximum), so the gap to ``bayes_optimal_meta_value`` is the least value
    of deliberate exploration."""
    return max(fixed_then_respond_value(opponent_mix, num_hands, restart, agent_seat, fixed)
               for fixed in best_fixed_strategies(opponent_mix, agent_seat))


def open_loop_meta_value(opponent_mix: OpponentMix, num_hands: int, restart: Restart, agent_seat: int) -> Fraction:
    """The best "play fixed, then respond" agent over all 64 pure strategies of its
    seat: probing allowed, but planned in advance (not adapted hand by hand). It
    equals the Bayes-optimal value for 2 hands."""
    keys = INFOSETS_BY_SEAT[_check_seat(agent_seat)]
    return max(fixed_then_respond_value(opponent_mix, num_hands, restart, agent_seat, dict(zip(keys, moves)))
               for moves in itertools.product(MOVES, repeat=len(keys)))


# --------------------------------------------------------------------------- #
# Formatting and plain-data reports (wired into `mage kuhn analyze`)


def format_fraction(value: Fraction) -> str:
    """``Fraction(1, 6)`` -> ``"1/6 (0.1667)"``; integers print without ``/1``."""
    exact = to_fraction(value)
    text = str(exact.numerator) if exact.denominator == 1 else f"{exact.numerator}/{exact.denominator}"
    return f"{text} ({float(exact):.4f})"


def describe_pure_strategy(choices: Mapping[str, int]) -> dict[str, str]:
    """{infoset: 0/1} -> {infoset: "PASS"/"BET"}."""
    return {key: MOVE_NAMES[move] for key, move in choices.items()}


def opponent_report(opponent: BehaviourStrategy) -> list[dict[str, object]]:
    """One row per agent seat: the best-response value (exact text and float),
    the best-response strategy by action name, and the infosets where the
    choice does not matter (equal values or never reached)."""
    rows: list[dict[str, object]] = []
    for seat in (0, 1):
        value, choices, indifferent = best_response_details([(1, opponent)], seat)
        rows.append({
            "opponent": opponent.name,
            "agent_seat": seat,
            "best_response_value": format_fraction(value),
            "best_response_chips": float(value),
            "best_response": describe_pure_strategy(choices),
            "indifferent_infosets": [key for key in INFOSETS_BY_SEAT[seat] if key in indifferent],
        })
    return rows


def population_report(opponent_mix: OpponentMix, num_hands: int = 3) -> list[dict[str, object]]:
    """The ceilings of docs/method.md section 11 for a population, per seat and on
    average: best fixed strategy, type known, Bayes-optimal final hand with fresh
    and with replayed deals (``num_hands`` hands per meta-episode)."""
    measures: dict[str, Callable[[int], Fraction]] = {
        "best_fixed": lambda seat: best_response(opponent_mix, seat)[0],
        "type_known": lambda seat: type_known_value(opponent_mix, seat),
        "bayes_fresh": lambda seat: bayes_optimal_meta_value(opponent_mix, num_hands, "fresh", seat),
        "bayes_same": lambda seat: bayes_optimal_meta_value(opponent_mix, num_hands, "same", seat),
    }
    per_seat = {seat: {name: fn(seat) for name, fn in measures.items()} for seat in (0, 1)}
    rows: list[dict[str, object]] = []
    for label in (0, 1, "mean"):
        row: dict[str, object] = {"agent_seat": label, "num_hands": num_hands}
        for name in measures:
            value = (per_seat[0][name] + per_seat[1][name]) / 2 if label == "mean" else per_seat[label][name]
            row[name] = format_fraction(value)
            row[f"{name}_chips"] = float(value)
        rows.append(row)
    return rows
