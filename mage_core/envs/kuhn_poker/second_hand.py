"""Does a trained Kuhn policy use what its first hand showed? (docs/learning.md, "Does it probe?")

The agent acting first against a suite of deterministic opponents: every way hand 1 can go
(the policy's hand-1 moves forced, the opponents answering as they do), the policy's
probability of betting its first decision of hand 2 with each card, next to the posterior over
opponents that hand 1 leaves and the best response to that posterior (``second_hand_bets``),
and those rows in a few numbers (``second_hand_metrics``). ``mage evaluate`` writes the
numbers for every suite (``probes.suite_probes``), ``mage kuhn probe`` prints the rows
(``commands.probe``). The policy is read through a ``envs.policy_view.PolicyView``.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Sequence

from mage_core.envs.kuhn_poker.analysis import best_response_details
from mage_core.envs.kuhn_poker.exact_greedy import fix_deals
from mage_core.envs.kuhn_poker.rules import (BET, CARD_LETTERS, DEALS, MOVE_NAMES, PASS, chips_for_player0,
                                             history_letters, infoset_key, is_showdown, is_terminal_history)
from mage_core.envs.policy_view import PolicyView
from mage_core.envs.registry import task
from mage_core.opponents.kuhn import BehaviourStrategy
from mage_core.opponents.population import Population, PopulationEntry
from mage_core.opponents.registry import make_opponent


def second_hand_unreadable(policy: PolicyView, entries: Sequence[PopulationEntry]) -> str | None:
    """Why ``second_hand_bets`` cannot read this policy against this suite, as one line that
    names the setting (and what would make it readable), or None where it can."""
    suite = _second_hand_suite(policy, entries)
    return suite if isinstance(suite, str) else None


def _second_hand_suite(policy: PolicyView, entries: Sequence[PopulationEntry]
                       ) -> str | tuple[dict[str, float], dict[str, Any]]:
    """The suite's opponents seated against an agent acting first (name -> prior weight, name
    -> deterministic behaviour strategy), or the reason they cannot be used."""
    s = policy.settings
    if policy.cfg.policy.action_mode != "constrained":
        return ("policy.action_mode: the bets are read from the scores of the legal actions, which free-text "
                "actions do not have; set constrained")
    if s.num_episodes < 2:
        return (f"algorithm.episodes_per_meta_episode: {s.num_episodes} hand(s) per meta-episode has no hand 2; "
                "set 2 or more")
    if s.reflect and s.reflections == "generated":
        return ("policy.reflections: generated reflections put sampled text into hand 2's prompt, so no one "
                "prompt stands for a view; use summary reflections")
    if s.retrieval != "none":
        return (f"method: a {s.retrieval!r} retrieval memory (A-MEM, Memento) is shared by the meta-episodes "
                "one call builds, so each hand-2 prompt would hold the other views' hands; probe a method "
                "without retrieval")
    weights = {name: p for (name, seat), p in Population(list(entries)).probabilities().items() if seat == 0 and p > 0}
    if not weights:
        return f"population.{policy.game}: no opponent of the suite plays against an agent acting first"
    second_to_act = [infoset_key(card, (move,)) for card in range(3) for move in (PASS, BET)]
    strategies = {}
    for name in sorted(weights):
        strategy = make_opponent(policy.game, name, policy.opponent_settings())
        if not (isinstance(strategy, BehaviourStrategy)
                and all(strategy.p_bet[key] in (0, 1) for key in second_to_act)):
            return (f"population.{policy.game}: {name!r} plays stochastically where the agent acts first, so "
                    "its hand-1 answers cannot be enumerated; use a suite of deterministic players "
                    "(e.g. --set population.kuhn_poker=probe)")
        strategies[name] = strategy
    return weights, strategies


def second_hand_bets(policy: PolicyView, entries: Sequence[PopulationEntry]) -> list[dict[str, Any]] | None:
    """Kuhn Poker, the agent first to act: what the policy opens in hand 2 given what hand 1
    showed it (the probe measurement, docs/learning.md "Does it probe?").

    For every deterministic opponent the suite seats against an agent acting first, every
    hand-1 deal and every way the agent can play hand 1 (bet; check then fold; check then
    call; a third each), the policy's hand-1 moves are forced and the opponent answers as it
    does (checked: the environment's hand-1 reward and decisions are the simulated ones);
    hand 2 is then dealt each card, and the policy's P(BET) at its first hand-2 decision is
    read from its candidate scores at the evaluation temperature (no sampling noise).

    One row per (view, hand-2 card), where the view is what the agent saw of hand 1 (its
    card, the betting, the opponent's card where shown): ``view``, ``card``, ``p_view``
    (how likely the view is under the suite's prior, a uniform deal and the three hand-1
    plays a third each), ``posterior`` (opponent -> probability given the view), ``p_bet``
    (the policy), ``best_bet`` (this one hand's best response to the posterior: 1 bet, 0
    check, None for a tie), ``bayes_bet`` (``best_bet`` where it is the Bayes-optimal hand-2
    opening, else None) and ``note``, why it is not: ``tie``; ``later hands`` (K > 2 and the
    opponent not revealed: probing may still pay in a later hand); ``restart same`` (hand 2
    replays hand 1's deal, which the posterior's best response does not know); ``early
    stop`` (K > 2: a won hand ends the meta-episode, which changes what hand 2 is worth).
    A view whose meta-episode stops after hand 1 (early stop) has no rows.

    None where it cannot be read (``second_hand_unreadable`` says why)."""
    suite = _second_hand_suite(policy, entries)
    if isinstance(suite, str):
        return None
    weights, strategies = suite
    s = policy.settings

    def hand_one(strategy: Any, deal: tuple[int, int], script: tuple[int, ...]) -> tuple[int, ...]:
        history: tuple[int, ...] = ()
        moves = iter(script)
        while not is_terminal_history(history):
            if len(history) % 2 == 0:
                history += (next(moves),)
            else:
                history += (int(strategy.p_bet[infoset_key(deal[1], history)]),)
        return history

    scripts = ((BET,), (PASS, PASS), (PASS, BET))  # bet; check, then fold a bet; check, then call a bet
    plays: dict[tuple[str, tuple[int, int], tuple[int, ...]], int] = {}  # (opponent, deal, history) -> scripts
    for name, strategy in sorted(strategies.items()):
        for deal in DEALS:
            for script in scripts:
                key = (name, deal, hand_one(strategy, deal, script))
                plays[key] = plays.get(key, 0) + 1

    def view_of(deal: tuple[int, int], history: tuple[int, ...]) -> str:
        shown = f", opponent showed {CARD_LETTERS[deal[1]]}" if is_showdown(history) else ""
        return f"{CARD_LETTERS[deal[0]]}: {history_letters(history)}{shown}"

    fresh = s.restart == "fresh"
    pairs, sequences, forced = [], [], []
    for name, deal, history in plays:
        for card in range(3) if fresh else (deal[0],):
            pairs.append((name, 0))
            sequences.append([deal, (card, next(c for c in range(3) if c != card))] if fresh else [deal])
            forced.append((name, deal, history, card))
    metas = policy.meta_episodes(pairs)
    fix_deals(metas, sequences)
    scale = task(policy.game).reward_scale(getattr(policy.cfg.env, policy.game))
    requests, kept = [], []
    for meta, (name, deal, history, card) in zip(metas, forced):
        agent_moves = history[0::2]
        for move in agent_moves:
            request = meta.request()
            policy.force(meta, request, MOVE_NAMES[move])
            if meta.episodes:
                break
        played = [d for d in meta.decisions if d.episode == 0 and d.phase == "play"]
        if (len(meta.episodes) != 1 or len(played) != len(agent_moves)
                or abs(meta.episodes[0].reward - chips_for_player0(deal, history) * scale) > 1e-9):
            reward = meta.episodes[0].reward if meta.episodes else None
            raise RuntimeError(f"second_hand_bets: against {name!r}, deal {deal}, the environment's hand 1 "
                               f"({len(played)} agent decision(s), reward {reward}) is not the simulated "
                               f"{history_letters(history)!r}: the environment's opponent did not play the "
                               "strategy the registry builds from the opponent settings")
        if meta.done:  # the meta-episode stopped after hand 1 (rollout.early_stop on a won hand)
            continue
        request = meta.request()
        if request.phase != "play":
            raise RuntimeError(f"second_hand_bets: hand 2 began with a {request.phase!r} turn, not a play")
        requests.append(request)
        kept.append((view_of(deal, history), card))
    if not requests:
        return None
    p_bet: dict[tuple[str, int], list[float]] = {}
    for key, bet in zip(kept, policy.probabilities(requests, MOVE_NAMES[BET])):
        p_bet.setdefault(key, []).append(bet)
    total_weight = sum(weights.values())
    likelihood: dict[str, dict[str, Fraction]] = {}  # view -> opponent -> P(view, opponent)
    for (name, deal, history), count in plays.items():
        per = likelihood.setdefault(view_of(deal, history), {})
        prior = Fraction(weights[name] / total_weight).limit_denominator(10 ** 9)
        per[name] = per.get(name, Fraction(0)) + prior * Fraction(count, 3 * len(DEALS))
    rows = []
    for view, per in likelihood.items():
        p_view = sum(per.values())
        posterior = {name: p / p_view for name, p in per.items()}
        _, choices, indifferent = best_response_details([(p, strategies[n]) for n, p in posterior.items()], 0)
        revealed = max(posterior.values()) == 1
        for card in range(3):
            if (view, card) not in p_bet:
                continue
            letter = CARD_LETTERS[card]
            best = None if letter in indifferent else int(choices[letter])
            note = ("tie" if best is None else "restart same" if not fresh
                    else "early stop" if s.early_stop and s.num_episodes > 2
                    else "later hands" if not revealed and s.num_episodes > 2 else "")
            rows.append({"view": view, "card": letter, "p_view": float(p_view),
                         "posterior": {n: float(p) for n, p in sorted(posterior.items())},
                         "p_bet": sum(p_bet[(view, card)]) / len(p_bet[(view, card)]),
                         "best_bet": best, "bayes_bet": None if note else best, "note": note})
    return rows


def second_hand_metrics(rows: Sequence[dict[str, Any]] | None) -> dict[str, float]:
    """``second_hand_bets`` in a few numbers (``all/...``, weighted by how likely each view is):
    ``bet_<card>_ep2_after_<opponent>``, the policy's hand-2 opening bet rate with that card
    after a hand 1 that revealed the opponent (posterior 1); ``bet_<card>_ep2_unrevealed``,
    after a hand 1 that did not; ``ep2_bayes_agreement``, the share of hand-2 openings where
    the policy's more likely move is the Bayes-optimal one (where ``bayes_bet`` names one)."""
    if not rows:
        return {}
    groups: dict[tuple[str, str], list[tuple[float, float]]] = {}
    agree = weight = 0.0
    for row in rows:
        revealed = [n for n, p in row["posterior"].items() if p > 1 - 1e-12]
        after = f"after_{revealed[0]}" if revealed else "unrevealed"
        groups.setdefault((row["card"], after), []).append((row["p_view"], row["p_bet"]))
        if row["bayes_bet"] is not None:
            agree += row["p_view"] * float((row["p_bet"] > 0.5) == bool(row["bayes_bet"]))
            weight += row["p_view"]
    out = {f"all/bet_{card}_ep2_{after}": sum(w * p for w, p in values) / sum(w for w, _ in values)
           for (card, after), values in sorted(groups.items())}
    if weight > 0:
        out["all/ep2_bayes_agreement"] = agree / weight
    return out
