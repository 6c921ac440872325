"""Metrics of finished meta-episodes (docs/method.md section 8).

Pass@k = the fraction of meta-episodes with at least one success in their
first k episodes; also per-episode success, draw rate and mean reward by
episode index, per (opponent, seat) and over the whole set. For Kuhn Poker the
headline is chips per hand by episode index (win rate does not measure
exploitation), next to the exact best-response value of each opponent.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Mapping, Sequence

import numpy as np

from mage_core.envs.registry import is_single_agent
from mage_core.envs.task_sets import Pool, pool_seeds, pooled, seed_stream
from mage_core.evaluation.stats import Z95, mean_interval, wilson_interval
from mage_core.evaluation.trials import NONE, SEAT_NAMES, trial_rows
from mage_core.opponents.population import Population, PopulationEntry
from mage_core.rollout.meta_episode import MetaEpisode, MetaEpisodeSpec


def evaluation_specs(
    game: str, entries: Sequence[PopulationEntry], per_opponent_seat: int, seed: int,
    env_settings: Any = None, pool: Pool = "report",
) -> list[MetaEpisodeSpec]:
    """A fixed evaluation set: every (opponent, seat) of the population with
    positive probability, ``per_opponent_seat`` meta-episodes each, task seeds
    from (seed, pair index, i). Identical on every call (docs/method.md section 8).
    Task seeds are 62-bit (as training's), so two sets of different ``seed``
    share none in practice (the selection and report sets: a test checks it). A
    single-agent set numbers its tasks: an env of a finite split (WebShop's goals,
    ALFWorld's games: ``FiniteSplit``) plays task i of its split, each once. A seeded
    task's set (Sokoban's levels, MineSweeper's boards: ``Task.seeded_tasks``) holds
    ``per_opponent_seat`` distinct tasks of content pool ``pool`` (``report`` or
    ``select``; ``envs.task_sets``), made with ``env_settings``."""
    if pooled(game):
        if env_settings is None:
            raise ValueError(f"an evaluation set of {game} needs its env settings: its tasks are drawn by content")
        seeds = pool_seeds(game, env_settings, seed_stream(seed, 0), per_opponent_seat, pool,
                           what=f"{pool} set (evaluation seed {seed})")
        return [MetaEpisodeSpec(game, None, 0, s, i) for i, s in enumerate(seeds)]
    if is_single_agent(game):
        seeds = _task_seeds(seed, 0, per_opponent_seat)
        return [MetaEpisodeSpec(game, None, 0, int(s), i, task_index=i) for i, s in enumerate(seeds)]
    pairs = sorted(Population(entries).probabilities())
    specs = []
    for index, (opponent, seat) in enumerate(pairs):
        seeds = _task_seeds(seed, index, per_opponent_seat)
        specs += [MetaEpisodeSpec(game, opponent, seat, int(s), len(specs) + i) for i, s in enumerate(seeds)]
    return specs


def _task_seeds(seed: int, index: int, count: int) -> np.ndarray:
    """``count`` 62-bit task seeds of (seed, index)."""
    return np.random.SeedSequence([seed, index]).generate_state(count, dtype=np.uint64) >> np.uint64(2)


def summarize(metas: Sequence[MetaEpisode], num_episodes: int, reward_per_unit: float = 1.0,
              unit: str = "reward", weights: Mapping[tuple[str, int], float] | None = None) -> dict[str, float]:
    """``summarize_trials`` of the meta-episodes' trial rows."""
    return summarize_trials(trial_rows(metas, "summary", reward_per_unit), num_episodes, unit, weights)


def summarize_trials(rows: Sequence[Mapping[str, Any]], num_episodes: int, unit: str = "reward",
                     weights: Mapping[tuple[str, int], float] | None = None,
                     intervals: bool = False) -> dict[str, float]:
    """Metrics of trial rows (``evaluation.trials``) of ONE suite.

    Keys ``<group>/<name>``: group is ``all`` or ``<opponent>/<seat>``; names
    ``{unit}_ep{k}`` (mean ``score``), ``success_ep{k}``, ``draw_ep{k}``,
    ``pass_at_{k}`` (k = 1..num_episodes), ``invalid_rate`` (invalid actions per
    turn), ``num_meta_episodes``, and with K > 1 ``success_gain``: the final
    episode's success minus the first's, paired on each meta-episode (does a later
    attempt do better than the first of the same meta-episode?). ``intervals`` adds
    ``<name>_low`` and ``<name>_high``: 95% Wilson intervals of rates, normal
    intervals of means (the gain's too), per group; with ``weights`` the ``all`` group's
    interval is the weighted mean's normal interval built from the pairs' own
    (``_reweight_all``), not a Wilson interval.

    Per-episode figures average over ALL meta-episodes, every key is present for
    k = 1..num_episodes: a meta-episode that stopped early (``rollout.early_stop``,
    after a success) counts at every later index as its last played episode:
    succeeded, not drawn, with that episode's score (as the paper's curves count
    a solved task as solved from then on). Without this, "success at episode K"
    would average only the meta-episodes that had failed until then.

    ``weights`` (population probability of each (opponent, seat)) turns the
    ``all`` group into the population-weighted average of the pairs, which is
    what the exact ceilings refer to; without it ``all`` pools every
    meta-episode (right for a batch already drawn from the population)."""
    groups: dict[str, dict[int, list[Mapping[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        names = ["all"]
        if row["opponent"] != NONE:
            names.append(f"{row['opponent']}/{row['seat']}")
        for g in names:
            groups[g][row["meta_episode"]].append(row)
    out: dict[str, float] = {}
    for g, metas in sorted(groups.items()):
        n = len(metas)
        by_episode: list[list[Mapping[str, Any]]] = [[] for _ in range(num_episodes)]
        first_success, gains = [], []
        invalid = turns = 0
        for episodes in metas.values():
            episodes = sorted(episodes, key=lambda r: r["episode"])
            first_success.append(next((r["episode"] for r in episodes if r["success"]), None))
            final = next((r for r in episodes if r["episode"] == num_episodes), episodes[-1])  # carried forward
            gains.append(float(bool(final["success"])) - float(bool(episodes[0]["success"])))
            for r in episodes:
                invalid += r["invalid"]
                turns += r["turns"]
                if r["episode"] <= num_episodes:
                    by_episode[r["episode"] - 1].append(r)
            last = episodes[-1]
            for k in range(last["episode"] + 1, num_episodes + 1):  # stopped early: carried forward
                by_episode[k - 1].append({**last, "draw": False})
        out[f"{g}/num_meta_episodes"] = float(n)
        out[f"{g}/invalid_rate"] = invalid / max(turns, 1)
        for k, played in enumerate(by_episode, start=1):
            _mean(out, f"{g}/{unit}_ep{k}", [r["score"] for r in played], intervals)
            _rate(out, f"{g}/success_ep{k}", sum(bool(r["success"]) for r in played), len(played), intervals)
            _rate(out, f"{g}/draw_ep{k}", sum(bool(r["draw"]) for r in played), len(played), intervals)
            _rate(out, f"{g}/pass_at_{k}", sum(f is not None and f <= k for f in first_success), n, intervals)
        if num_episodes > 1:
            _mean(out, f"{g}/success_gain", gains, intervals)
    if weights:
        _reweight_all(out, weights)
    return out


def _rate(out: dict[str, float], key: str, hits: int, n: int, intervals: bool) -> None:
    out[key] = hits / n
    if intervals:
        out[f"{key}_low"], out[f"{key}_high"] = wilson_interval(hits, n)


def _mean(out: dict[str, float], key: str, values: list[float], intervals: bool) -> None:
    out[key] = float(np.mean(values))
    if intervals:
        _, out[f"{key}_low"], out[f"{key}_high"] = mean_interval(values)


#: Metric names that are rates (their intervals are clamped to [0, 1]).
RATE_NAMES = ("success_ep", "draw_ep", "pass_at_")


def _reweight_all(out: dict[str, float], weights: Mapping[tuple[str, int], float]) -> None:
    """Replace the pooled ``all/*`` figures by the weighted average over the pairs.

    An interval of the weighted average combines the pairs' standard errors,
    each read off its own 95% interval as (high - low) / (2 z): independent
    pairs, so variances add with squared weights."""
    pairs = {f"{o}/{SEAT_NAMES[s]}": w for (o, s), w in weights.items() if w > 0}
    names = {key.split("/", 1)[1] for key in out if key.startswith("all/")} - {"num_meta_episodes"}
    for name in sorted(n for n in names if not n.endswith(("_low", "_high"))):
        present = {g: w for g, w in pairs.items() if f"{g}/{name}" in out}
        if not present:
            continue
        total = sum(present.values())
        out[f"all/{name}"] = sum(w * out[f"{g}/{name}"] for g, w in present.items()) / total
        if f"all/{name}_low" in out:
            variance = sum((w / total * (out[f"{g}/{name}_high"] - out[f"{g}/{name}_low"]) / (2 * Z95)) ** 2
                           for g, w in present.items())
            half = Z95 * math.sqrt(variance)
            low, high = out[f"all/{name}"] - half, out[f"all/{name}"] + half
            if name.startswith(RATE_NAMES):  # a rate's interval stays within [0, 1]
                low, high = max(low, 0.0), min(high, 1.0)
            out[f"all/{name}_low"], out[f"all/{name}_high"] = low, high
