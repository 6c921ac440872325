"""Metrics of finished meta-episodes (METHOD.md section 8).

Pass@k = the fraction of meta-episodes with at least one success in their
first k episodes; also per-episode success, draw rate and mean reward by
episode index, per (opponent, seat) and over the whole set. For Kuhn Poker the
headline is chips per hand by episode index (win rate does not measure
exploitation), next to the exact best-response value of each opponent.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from mage_core.envs.base import Outcome
from mage_core.opponents.population import Population, PopulationEntry
from mage_core.rollout.meta_episode import MetaEpisode, MetaEpisodeSpec

SEAT_NAMES = {0: "first", 1: "second"}


def evaluation_specs(
    game: str, entries: Sequence[PopulationEntry], per_opponent_seat: int, seed: int
) -> list[MetaEpisodeSpec]:
    """A fixed evaluation set: every (opponent, seat) of the population with
    positive probability, ``per_opponent_seat`` meta-episodes each, task seeds
    from (seed, pair index, i). Identical on every call (METHOD.md section 8)."""
    if game == "sokoban":
        seeds = np.random.SeedSequence([seed, 0]).generate_state(per_opponent_seat)
        return [MetaEpisodeSpec(game, None, 0, int(s), i) for i, s in enumerate(seeds)]
    pairs = sorted(Population(entries).probabilities())
    specs = []
    for index, (opponent, seat) in enumerate(pairs):
        seeds = np.random.SeedSequence([seed, index]).generate_state(per_opponent_seat)
        specs += [MetaEpisodeSpec(game, opponent, seat, int(s), len(specs) + i) for i, s in enumerate(seeds)]
    return specs


@dataclass
class _Tally:
    rewards: list[list[float]]  # per episode index
    success: list[list[bool]]
    draw: list[list[bool]]
    first_success: list[int | None]  # episode index of the first win per meta-episode
    invalid: int = 0
    turns: int = 0


def summarize(metas: Sequence[MetaEpisode], num_episodes: int, reward_per_unit: float = 1.0,
              unit: str = "reward", weights: Mapping[tuple[str, int], float] | None = None) -> dict[str, float]:
    """Metric keys ``<group>/<name>``: group is ``all`` or ``<opponent>/<seat>``;
    names ``{unit}_ep{k}``, ``success_ep{k}``, ``draw_ep{k}``, ``pass@{k}``
    (k = 1..num_episodes), ``invalid_rate``, ``num_meta_episodes``.

    ``weights`` (population probability of each (opponent, seat)) turns the
    ``all`` group into the population-weighted average of the pairs, which is
    what the exact ceilings refer to; without it ``all`` pools every
    meta-episode (right for a batch already drawn from the population)."""
    tallies: dict[str, _Tally] = defaultdict(
        lambda: _Tally([[] for _ in range(num_episodes)], [[] for _ in range(num_episodes)],
                       [[] for _ in range(num_episodes)], []))
    for meta in metas:
        groups = ["all"]
        if meta.spec.opponent is not None:
            groups.append(f"{meta.spec.opponent}/{SEAT_NAMES[meta.spec.agent_seat]}")
        first = next((k for k, e in enumerate(meta.episodes) if e.outcome is Outcome.WIN), None)
        for g in groups:
            t = tallies[g]
            t.first_success.append(first)
            for k, e in enumerate(meta.episodes[:num_episodes]):
                t.rewards[k].append(e.reward / reward_per_unit)
                t.success[k].append(e.outcome is Outcome.WIN)
                t.draw[k].append(e.outcome is Outcome.DRAW)
                t.invalid += e.num_invalid
                t.turns += e.num_turns
    out: dict[str, float] = {}
    for g, t in sorted(tallies.items()):
        n = len(t.first_success)
        out[f"{g}/num_meta_episodes"] = float(n)
        out[f"{g}/invalid_rate"] = t.invalid / max(t.turns, 1)
        for k in range(num_episodes):
            if t.rewards[k]:
                out[f"{g}/{unit}_ep{k + 1}"] = float(np.mean(t.rewards[k]))
                out[f"{g}/success_ep{k + 1}"] = float(np.mean(t.success[k]))
                out[f"{g}/draw_ep{k + 1}"] = float(np.mean(t.draw[k]))
            out[f"{g}/pass@{k + 1}"] = sum(f is not None and f <= k for f in t.first_success) / n
    if weights:
        _reweight_all(out, weights)
    return out


def _reweight_all(out: dict[str, float], weights: Mapping[tuple[str, int], float]) -> None:
    """Replace the pooled ``all/*`` rates by the weighted average over the pairs."""
    pairs = {f"{o}/{SEAT_NAMES[s]}": w for (o, s), w in weights.items() if w > 0}
    names = {key.split("/", 1)[1] for key in out if key.startswith("all/")} - {"num_meta_episodes"}
    for name in names:
        present = {g: w for g, w in pairs.items() if f"{g}/{name}" in out}
        if not present:
            continue
        total = sum(present.values())
        out[f"all/{name}"] = sum(w * out[f"{g}/{name}"] for g, w in present.items()) / total
