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
    from mage_core.envs.kuhn_poker.rules import BET, MOVE_NAMES, PASS
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
