"""The exact value of a greedy policy in Kuhn Poker meta-episodes (docs/method.md section 11).

Against deterministic opponents (the paper's archetypes, ``cfr_argmax``) a
greedy policy (temperature 0: the most likely action) is a deterministic
function of the deals, so its expected chips per hand by episode index are an
exact, finite sum: every (opponent, seat) of the population with its
probability, times every deal sequence with its probability (6 deals per hand;
K hands with fresh deals: 6^K sequences, 1,296 for K = 3 and 2 seats x 3
opponents; with the same deal replayed: 6). No sampling noise, so it is the
figure to select checkpoints on and to compare with the exact ceilings
(``mage kuhn analyze``); the sampled figure (the policy as it plays, at the
evaluation temperature) stands next to it.

A population with a stochastic opponent has no such finite sum over deals:
``exact_greedy_cases`` returns None and no exact figure is reported.

The task's ``TaskExact`` hooks: ``exact_greedy_cases`` (``greedy_cases``) and
``greedy_values``, which plays the enumerated meta-episodes through a
``envs.policy_view.PolicyView`` (the policy lives above the games: the trainer passes it in).
"""

from __future__ import annotations

import itertools
from typing import Any, Sequence

import numpy as np

from mage_core.envs.kuhn_poker.rules import DEALS
from mage_core.envs.policy_view import PolicyView
from mage_core.envs.registry import task
from mage_core.opponents.kuhn import BehaviourStrategy
from mage_core.opponents.population import Population, PopulationEntry
from mage_core.opponents.registry import OpponentSettings, make_opponent

#: Agent seat -> the name of its group in an evaluation's figures (``<opponent>/<seat>``).
SEAT_NAMES = {0: "first", 1: "second"}


def exact_greedy_cases(
    entries: Sequence[PopulationEntry], settings: OpponentSettings, num_episodes: int, restart: str
) -> list[tuple[tuple[str, int], tuple[tuple[int, int], ...], float]] | None:
    """Every ((opponent, agent seat), deal sequence, probability) of the exact sum, or None
    when an opponent of the population is stochastic. Probabilities add up to 1."""
    pairs = Population(entries).probabilities()
    for opponent, _ in pairs:
        strategy = make_opponent("kuhn_poker", opponent, settings)
        if not (isinstance(strategy, BehaviourStrategy) and strategy.is_deterministic):
            return None
    hands = num_episodes if restart == "fresh" else 1
    sequences = list(itertools.product(DEALS, repeat=hands))
    cases = []
    for (opponent, seat), p_pair in sorted(pairs.items()):
        if p_pair <= 0:
            continue
        for sequence in sequences:
            cases.append(((opponent, seat), sequence, p_pair / len(sequences)))
    return cases


def greedy_values(policy: PolicyView, entries: Sequence[PopulationEntry]) -> dict[str, float]:
    """Against a population of deterministic opponents: the exact chips per hand of the
    greedy policy, every (opponent, seat) and deal sequence enumerated, as
    ``.../chips_exact_ep{k}`` (``exact_values``); empty for populations with a stochastic
    opponent. Always in this process (the deals are fixed on the built meta-episodes)."""
    k = policy.settings.num_episodes
    cases = exact_greedy_cases(entries, policy.cfg.opponents.settings(), k, policy.settings.restart)
    if cases is None:
        return {}
    metas = policy.meta_episodes([pair for pair, _, _ in cases])
    fix_deals(metas, [deals for _, deals, _ in cases])
    metas = policy.play_greedy(metas)
    scale = task(policy.game).reward_scale(getattr(policy.cfg.env, policy.game))
    return exact_values(metas, [p for _, _, p in cases], k, scale)


def fix_deals(metas: Sequence[Any], sequences: Sequence[Sequence[tuple[int, int]]]) -> None:
    """Give each freshly built meta-episode its deal sequence (before any play)."""
    for meta, sequence in zip(metas, sequences):
        meta.env.fix_deals(sequence)  # type: ignore[attr-defined]


def exact_values(metas: Sequence[Any], weights: Sequence[float], num_episodes: int,
                 reward_per_chip: float) -> dict[str, float]:
    """Chips per hand by episode index, weighted: keys ``all/chips_exact_ep{k}`` and
    ``<opponent>/<seat>/chips_exact_ep{k}`` (the pair's own conditional value). A
    meta-episode that stopped early (``rollout.early_stop``) keeps its last hand's
    chips at the later indices, as the per-episode metrics do."""
    chips = np.zeros((len(metas), num_episodes))
    for i, meta in enumerate(metas):
        rewards = [e.reward / reward_per_chip for e in meta.episodes]
        chips[i] = rewards + [rewards[-1]] * (num_episodes - len(rewards))
    w = np.asarray(weights, dtype=np.float64)
    out: dict[str, float] = {}
    groups: dict[str, list[int]] = {}
    for i, meta in enumerate(metas):
        groups.setdefault(f"{meta.spec.opponent}/{SEAT_NAMES[meta.spec.agent_seat]}", []).append(i)
    for k in range(num_episodes):
        out[f"all/chips_exact_ep{k + 1}"] = float(w @ chips[:, k] / w.sum())
        for name, rows in groups.items():
            out[f"{name}/chips_exact_ep{k + 1}"] = float(w[rows] @ chips[rows, k] / w[rows].sum())
    return out
