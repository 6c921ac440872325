"""From finished meta-episodes to PPO samples with MAGE's advantages.

Per meta-episode: step returns from the placed rewards (METHOD.md section 4).
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
from mage_core.algos.returns import episode_returns, meta_episode_returns
from mage_core.backends.base import Sample
from mage_core.rollout.meta_episode import MetaEpisode


@dataclass(frozen=True)
class AdvantageSettings:
    """The numbers of the ``algorithm`` section that the math needs."""

    reward_variant: Literal["differential", "cumulative", "single_episode"]
    advantage: Literal["gigpo", "grpo"]
    episode_norm: Literal["mean_norm", "mean_std_norm"]
    step_weight: float
    anchor: Literal["global", "local"]
    grouping: Literal["stationary", "non_stationary"]
    gamma_step: float
    gamma_traj: float
    group_scope: Literal["task", "batch"] = "task"
    episode_score: Literal["episode_reward", "return"] = "episode_reward"
    episode_baseline: Literal["group", "group_and_episode"] = "group"


def episode_scores(rewards: np.ndarray, variant: str) -> np.ndarray:
    """The episode term's score per episode: d_k for MAGE, R_k otherwise."""
    if variant == "differential":
        return np.diff(rewards, prepend=0.0)
    return rewards


def build_samples(metas: Sequence[MetaEpisode], settings: AdvantageSettings) -> list[Sample]:
    """One Sample per policy decision, advantages filled in, no padding."""
    scores: list[float] = []
    returns: list[float] = []
    groups: list[object] = []
    anchors: list[object] = []
    decisions = []
    for meta in metas:
        if not meta.done:
            raise ValueError("build_samples needs finished meta-episodes")
        ds = meta.decisions
        rewards = np.array([d.task_reward for d in ds], dtype=float)
        episode = np.array([d.episode for d in ds], dtype=int)
        is_play = np.array([d.phase == "play" for d in ds], dtype=bool)
        ret = meta_episode_returns(settings.reward_variant, rewards, episode, is_play,
                                   settings.gamma_step, settings.gamma_traj)
        per_episode = episode_scores(episode_returns(rewards, episode, is_play), settings.reward_variant)
        spec = meta.spec
        key = group_key(spec.task_seed, spec.opponent, spec.agent_seat, settings.grouping, settings.group_scope)
        for d, r in zip(ds, ret):
            if settings.episode_score == "return":
                score = float(r)  # the step return itself (REINFORCE-style credit, section 4)
            else:
                score = per_episode[d.episode] if d.phase == "play" else 0.0
            scores.append(float(score) - d.penalty)
            returns.append(float(r) - d.penalty)
            # "group_and_episode" (an option beyond the paper): baselines per episode
            # index, so that later episodes' systematically different scores do not
            # shift their advantages (it also splits anchor clusters by episode).
            groups.append(key if settings.episode_baseline == "group" else (*key, d.episode))
            anchors.append(anchor_key(d.anchor, d.episode, spec.opponent,
                                      global_anchor=settings.anchor == "global",
                                      stationary=settings.grouping == "stationary"))
            decisions.append(d)
    if settings.advantage == "grpo":
        advantage = grpo_advantages(np.array(scores), groups)
    else:
        advantage = gigpo_advantages(np.array(scores), np.array(returns), groups, anchors,
                                     step_weight=settings.step_weight, episode_norm=settings.episode_norm).advantage
    samples = []
    for d, a in zip(decisions, advantage):
        if d.candidate_ids is not None:
            samples.append(Sample(prompt=d.prompt_ids, advantage=float(a), candidates=d.candidate_ids,
                                  choice=d.choice))
        else:
            assert d.response_ids is not None
            samples.append(Sample(prompt=d.prompt_ids, advantage=float(a), response=d.response_ids))
    return samples
