"""From finished meta-episodes to PPO samples with MAGE's advantages.

Per meta-episode: step returns from the placed rewards (docs/method.md section 4).
Across the batch: GiGPO or GRPO advantages with explicit group keys, so that
agent-specific normalization is a key, not an array layout (section 5).
Each sample's own penalties (invalid action, length) are subtracted from its
episode score and its return: they are the immediate cost of that response.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Sequence

import numpy as np

from mage_core.algos.advantages import anchor_key, gigpo_advantages, grpo_advantages, group_key
from mage_core.algos.returns import batch_returns
from mage_core.backends.base import Sample
from mage_core.rollout.meta_episode import MetaEpisode


@dataclass(frozen=True)
class AdvantageSettings:
    """The numbers of the ``algorithm`` section that the math needs."""

    reward_variant: Literal["differential", "cumulative", "single_episode", "final", "lamer"]
    advantage: Literal["gigpo", "grpo"]
    episode_norm: Literal["mean_norm", "mean_std_norm"]
    step_weight: float
    anchor: Literal["global", "local"]
    grouping: Literal["stationary", "non_stationary"]
    gamma_step: float
    gamma_traj: float
    group_scope: Literal["task", "batch"] = "task"
    episode_score: Literal["episode_reward", "return"] = "episode_reward"
    episode_baseline: Literal["group", "group_and_episode", "group_episode_turn"] = "group"


def episode_scores(totals: np.ndarray, variant: str) -> np.ndarray:
    """The episode term's score per episode: d_k for MAGE, R_k otherwise.
    ``totals``: R_k along the last axis (``[K]`` or ``[M, K]``)."""
    if variant == "differential":
        return np.diff(totals, axis=-1, prepend=0.0)
    return totals


def build_samples(metas: Sequence[MetaEpisode], settings: AdvantageSettings) -> list[Sample]:
    """One Sample per policy decision, advantages filled in, no padding.

    The returns of the whole batch come from one vectorised sweep
    (``batch_returns``, equal to ``meta_episode_returns`` per meta-episode)."""
    for meta in metas:
        if not meta.done:
            raise ValueError("build_samples needs finished meta-episodes")
    if not metas:
        raise ValueError("build_samples needs at least one meta-episode")
    lengths = [len(m.decisions) for m in metas]
    shape = (len(metas), max(lengths))
    rewards, episode = np.zeros(shape), np.zeros(shape, dtype=np.int64)
    is_play, valid = np.zeros(shape, dtype=bool), np.zeros(shape, dtype=bool)
    for m, meta in enumerate(metas):
        n = lengths[m]
        rewards[m, :n] = [d.task_reward for d in meta.decisions]
        episode[m, :n] = [d.episode for d in meta.decisions]
        is_play[m, :n] = [d.phase == "play" for d in meta.decisions]
        valid[m, :n] = True
    step_return, totals = batch_returns(settings.reward_variant, rewards, episode, is_play, valid,
                                        settings.gamma_step, settings.gamma_traj)
    per_episode = episode_scores(totals, settings.reward_variant)  # [M, K]
    scores: list[float] = []
    returns: list[float] = []
    groups: list[object] = []
    anchors: list[object] = []
    decisions = []
    global_anchor, stationary = settings.anchor == "global", settings.grouping == "stationary"
    for m, meta in enumerate(metas):
        spec = meta.spec
        key = group_key(spec.task_seed, spec.opponent, spec.agent_seat, settings.grouping, settings.group_scope)
        for t, d in enumerate(meta.decisions):
            r = float(step_return[m, t])
            if settings.episode_score == "return":
                score = r  # the step return itself (REINFORCE-style credit, section 4)
            else:
                score = float(per_episode[m, d.episode]) if d.phase == "play" else 0.0
            scores.append(score - d.penalty)
            returns.append(r - d.penalty)
            # "group_and_episode" (an option beyond the paper): baselines per episode
            # index, so that later episodes' systematically different scores do not
            # shift their advantages (it also splits anchor clusters by episode).
            # "group_episode_turn" (beyond the paper, too): per (group, episode index,
            # turn within the episode), the situation a decision is taken in.
            if settings.episode_baseline == "group":
                groups.append(key)
            elif settings.episode_baseline == "group_and_episode":
                groups.append((*key, d.episode))
            else:
                groups.append((*key, d.episode, d.turn))
            anchors.append(anchor_key(d.anchor, d.episode, spec.opponent, global_anchor=global_anchor,
                                      stationary=stationary))
            decisions.append(d)
    if settings.advantage == "grpo":
        advantage = grpo_advantages(np.array(scores), groups)
    else:
        advantage = gigpo_advantages(np.array(scores), np.array(returns), groups, anchors,
                                     step_weight=settings.step_weight, episode_norm=settings.episode_norm).advantage
    samples = []
    for d, a in zip(decisions, advantage.tolist()):
        if d.candidate_ids is not None:
            samples.append(Sample(prompt=d.prompt_ids, advantage=a, candidates=d.candidate_ids, choice=d.choice))
        else:
            assert d.response_ids is not None
            samples.append(Sample(prompt=d.prompt_ids, advantage=a, response=d.response_ids))
    return samples
