"""What the policy's play reveals beyond its success rate, for tasks that declare it.

- ``exact_greedy_values``: tasks with ``Task.exact_values`` (Kuhn Poker) against deterministic
  opponents: the greedy policy's exact value, every deal sequence enumerated.
- ``first_hand_bets``, ``opening_bets``, ``first_hand_strategy``,
  ``first_hand_exploitability``: tasks with ``Task.strategy_probes`` (Kuhn Poker): the policy's
  first hand read as a behaviour strategy from its candidate scores.

Each takes the trainer (``MetaRLTrainer``) whose policy it reads and returns metrics (or
the strategy); each returns nothing for a task that does not declare the capability. The
iteration loop (``trainers/meta_rl.py``) and ``mage evaluate`` call them; the league
(``train.league``) reads ``first_hand_strategy``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import torch

from mage_core.generation import SamplingParams
from mage_core.envs.registry import task
from mage_core.opponents.population import Population, PopulationEntry
from mage_core.rollout.meta_episode import MetaEpisodeSpec, Response
from mage_core.rollout.runner import meta_episode_seeds

if TYPE_CHECKING:
    from mage_core.trainers.meta_rl import MetaRLTrainer


def exact_greedy_values(trainer: "MetaRLTrainer", entries: Sequence[PopulationEntry] | None = None
                        ) -> dict[str, float]:
    """Kuhn Poker against a population of deterministic opponents (default:
    the training population): the exact chips per hand of the greedy policy,
    every (opponent, seat) and deal sequence enumerated
    (``mage_core.evaluation.kuhn_exact``), as ``eval/.../chips_exact_ep{k}``.
    Empty for other games and for populations with a stochastic opponent.
    Always in this process (the deals are fixed on the built meta-episodes).
    Not for the memory baselines: their shared memory bank ties the enumerated
    meta-episodes together, so the weighted sum would not be an exact value."""
    if not task(trainer.game).exact_values or trainer.eval_settings.retrieval != "none":
        return {}
    from mage_core.evaluation.kuhn_exact import exact_greedy_specs, exact_values, fix_deals

    k = trainer.eval_settings.num_episodes
    entries = trainer.cfg.population.entries(trainer.game) if entries is None else entries  # type: ignore[assignment]
    cases = exact_greedy_specs(entries, trainer.cfg.opponents.settings(), k, trainer.eval_settings.restart)
    if cases is None:
        return {}
    metas = trainer.build([spec for spec, _, _ in cases], trainer.eval_settings)
    fix_deals(metas, [deals for _, deals, _ in cases])
    greedy = SamplingParams(temperature=0.0, max_new_tokens=trainer.cfg.policy.max_new_tokens,
                            stop_token_ids=trainer.codec.stop_token_ids)
    seeds = meta_episode_seeds(torch.Generator().manual_seed(0), len(metas))  # greedy: never drawn
    metas = trainer.play(metas, trainer.actor(greedy), seeds)
    values = exact_values(metas, [p for _, _, p in cases], k, task(trainer.game).reward_scale(getattr(trainer.cfg.env, trainer.game)))
    return {f"eval/{key}": v for key, v in values.items()}


def first_hand_bets(trainer: "MetaRLTrainer", cases: Sequence[tuple[str, int, tuple[int, int], bool]]) -> list[float]:
    """Kuhn Poker: the policy's probability of BET at one decision of the FIRST
    hand per case (opponent, agent seat, deal, agent passed first): the deal is
    fixed, the agent passes first where asked, and the opponent plays its own
    (deterministic, for the cases to reach their infoset) move. Read from the
    candidate scores at the evaluation temperature: no sampling noise. The first
    hand has no history, so this is the policy before it has met anyone."""
    from mage_core.envs.kuhn_poker.rules import MOVE_NAMES, PASS
    from mage_core.evaluation.kuhn_exact import fix_deals

    specs = [MetaEpisodeSpec(trainer.game, opponent, seat, 0, i) for i, (opponent, seat, _, _) in enumerate(cases)]
    metas = trainer.build(specs, trainer.eval_settings)
    fix_deals(metas, [[deal] for _, _, deal, _ in cases])
    requests = []
    for meta, (_, _, _, passed) in zip(metas, cases):
        request = meta.request()
        if passed:  # the agent's PASS; the opponent answers before the next request
            texts = request.candidate_texts or []
            meta.apply(request, Response(MOVE_NAMES[PASS], 0.0, choice=texts.index(MOVE_NAMES[PASS])))
            request = meta.request()
        requests.append(request)
    return _bet_probabilities(trainer, requests)


def _bet_probabilities(trainer: "MetaRLTrainer", requests: Sequence[Any]) -> list[float]:
    """Kuhn Poker: the policy's probability of BET at each request, read from its candidate
    scores at the evaluation temperature (greedy at 0): what the rollout samples from."""
    from mage_core.envs.kuhn_poker.rules import BET, MOVE_NAMES

    scores = trainer.generator.score([r.prompt_ids for r in requests], [r.candidate_ids for r in requests])
    temperature = trainer.cfg.evaluation.temperature
    out = []
    for request, per_candidate in zip(requests, scores):
        totals = torch.tensor([sum(token_logprobs) for token_logprobs in per_candidate], dtype=torch.float64)
        probs = (torch.nn.functional.one_hot(totals.argmax(), len(totals)).double() if temperature == 0
                 else torch.softmax(totals / temperature, dim=0))
        out.append(sum(float(q) for q, action in zip(probs, request.candidate_texts or [])
                       if action == MOVE_NAMES[BET]))  # candidates are the legal actions, canonical
    return out


def opening_bets(trainer: "MetaRLTrainer", entries: Sequence[PopulationEntry]) -> dict[str, float]:
    """Kuhn Poker with the agent first to act: the policy's probability of
    betting its first decision of the FIRST hand with each card, averaged over
    the suite's opponents it meets in that seat (``all/opening_bet_{J,Q,K}_ep1``).

    Against the exploration pair (preset ``probe``) the Bayes-optimal agent
    bets every card there (the answer to a bet is what tells the two apart)
    while "play fixed, then respond" never bets J or Q (``analysis``).
    Constrained actions only (empty otherwise, and for suites where the agent
    never opens)."""
    if not task(trainer.game).strategy_probes or trainer.cfg.policy.action_mode != "constrained":
        return {}
    from mage_core.envs.kuhn_poker.rules import CARD_LETTERS, DEALS

    pairs = [(name, p) for (name, seat), p in sorted(Population(list(entries)).probabilities().items())
             if seat == 0 and p > 0]
    if not pairs:
        return {}
    deals = [next(d for d in DEALS if d[0] == card) for card in range(3)]
    bets = first_hand_bets(trainer, [(name, 0, deal, False) for name, _ in pairs for deal in deals])
    total = sum(p for _, p in pairs)
    out = {f"all/opening_bet_{CARD_LETTERS[card]}_ep1": 0.0 for card in range(3)}
    for i, bet in enumerate(bets):
        out[f"all/opening_bet_{CARD_LETTERS[i % 3]}_ep1"] += pairs[i // 3][1] / total * bet
    return out

def first_hand_strategy(trainer: "MetaRLTrainer") -> Any:
    """Kuhn Poker: the policy's first hand as a behaviour strategy (P(BET) at each
    of the 12 information sets, ``first_hand_bets``), or None when it cannot be
    read (another game, free-text actions). Each infoset is reached with a
    built-in deterministic opponent: ``aggressive`` bets every card (the agent's
    answers to a bet), ``conservative`` checks J and Q (its turn after a check)."""
    if not task(trainer.game).strategy_probes or trainer.cfg.policy.action_mode != "constrained":
        return None
    from mage_core.envs.kuhn_poker.rules import CARD_LETTERS
    from mage_core.opponents.kuhn import BehaviourStrategy

    cases, keys = [], []
    for card in range(3):
        other = 0 if card != 0 else 1  # the opponent holds J, or Q when the agent has J
        cases += [("aggressive", 0, (card, other), False), ("aggressive", 0, (card, other), True),
                  ("conservative", 1, (other, card), False), ("aggressive", 1, (other, card), False)]
        letter = CARD_LETTERS[card]
        keys += [letter, f"{letter}pb", f"{letter}p", f"{letter}b"]
    bets = first_hand_bets(trainer, cases)
    return BehaviourStrategy("policy (first hand)", dict(zip(keys, bets)))

def first_hand_exploitability(trainer: "MetaRLTrainer") -> dict[str, float]:
    """``eval/first_hand/exploitability``: what a best responder wins per hand,
    seats averaged, from the policy's first-hand strategy (exact for that
    strategy, ``analysis.exploitability``; 0 at a Nash equilibrium, whose value
    to the first player is -1/18), and ``eval/first_hand/p_bet_<infoset>``."""
    strategy = first_hand_strategy(trainer)
    if strategy is None:
        return {}
    from mage_core.envs.kuhn_poker.analysis import exploitability

    out = {"eval/first_hand/exploitability": float(exploitability(strategy))}
    out.update({f"eval/first_hand/p_bet_{key}": float(p) for key, p in strategy.p_bet.items()})
    return out


def second_hand_unreadable(trainer: "MetaRLTrainer", entries: Sequence[PopulationEntry]) -> str | None:
    """Why ``second_hand_bets`` cannot read this policy against this suite, as one line that
    names the setting (and what would make it readable), or None where it can."""
    suite = _second_hand_suite(trainer, entries)
    return suite if isinstance(suite, str) else None


def _second_hand_suite(trainer: "MetaRLTrainer", entries: Sequence[PopulationEntry]
                       ) -> str | tuple[dict[str, float], dict[str, Any]]:
    """The suite's opponents seated against an agent acting first (name -> prior weight, name
    -> deterministic behaviour strategy), or the reason they cannot be used."""
    s = trainer.eval_settings
    if not task(trainer.game).strategy_probes:
        return f"env.name: {trainer.game} declares no strategy probes (Kuhn Poker does)"
    if trainer.cfg.policy.action_mode != "constrained":
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
    from mage_core.envs.kuhn_poker.rules import BET, PASS, infoset_key
    from mage_core.opponents.kuhn import BehaviourStrategy
    from mage_core.opponents.registry import make_opponent

    weights = {name: p for (name, seat), p in Population(list(entries)).probabilities().items() if seat == 0 and p > 0}
    if not weights:
        return f"population.{trainer.game}: no opponent of the suite plays against an agent acting first"
    second_to_act = [infoset_key(card, (move,)) for card in range(3) for move in (PASS, BET)]
    strategies = {}
    for name in sorted(weights):
        strategy = make_opponent(trainer.game, name, trainer.opponent_settings())
        if not (isinstance(strategy, BehaviourStrategy)
                and all(strategy.p_bet[key] in (0, 1) for key in second_to_act)):
            return (f"population.{trainer.game}: {name!r} plays stochastically where the agent acts first, so "
                    "its hand-1 answers cannot be enumerated; use a suite of deterministic players "
                    "(e.g. --set population.kuhn_poker=probe)")
        strategies[name] = strategy
    return weights, strategies


def second_hand_bets(trainer: "MetaRLTrainer", entries: Sequence[PopulationEntry]) -> list[dict[str, Any]] | None:
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
    suite = _second_hand_suite(trainer, entries)
    if isinstance(suite, str):
        return None
    weights, strategies = suite
    s = trainer.eval_settings
    from fractions import Fraction

    from mage_core.envs.kuhn_poker.analysis import best_response_details
    from mage_core.envs.kuhn_poker.rules import (BET, CARD_LETTERS, DEALS, MOVE_NAMES, PASS, chips_for_player0,
                                                 history_letters, infoset_key, is_showdown, is_terminal_history)
    from mage_core.evaluation.kuhn_exact import fix_deals

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
    specs, sequences, forced = [], [], []
    for name, deal, history in plays:
        for card in range(3) if fresh else (deal[0],):
            specs.append(MetaEpisodeSpec(trainer.game, name, 0, 0, len(specs)))
            sequences.append([deal, (card, next(c for c in range(3) if c != card))] if fresh else [deal])
            forced.append((name, deal, history, card))
    metas = trainer.build(specs, s)
    fix_deals(metas, sequences)
    scale = task(trainer.game).reward_scale(getattr(trainer.cfg.env, trainer.game))
    requests, kept = [], []
    for meta, (name, deal, history, card) in zip(metas, forced):
        agent_moves = history[0::2]
        for move in agent_moves:
            request = meta.request()
            text = MOVE_NAMES[move]
            meta.apply(request, Response(text, 0.0, choice=(request.candidate_texts or []).index(text)))
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
    for key, bet in zip(kept, _bet_probabilities(trainer, requests)):
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
