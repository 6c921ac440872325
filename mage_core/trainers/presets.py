"""Named methods: the paper's baselines and ablations (METHOD.md section 9).

A preset fills the ``algorithm`` keys a params file leaves unset; keys given
explicitly win. Population ablations also name the population presets they
train against (applied unless params.yaml names a population itself).
"""

from __future__ import annotations

from typing import Any

#: The MAGE recipe (METHOD.md sections 1-5).
_MAGE: dict[str, Any] = {
    "episodes_per_meta_episode": 3,
    "reflect": True,
    "reward_variant": "differential",
    "advantage": "gigpo",
    "episode_norm": "mean_norm",
    "step_weight": 1.0,
    "anchor": "global",
    "grouping": "stationary",
    "group_scope": "task",
    "group_size": 8,
    "gamma_step": 0.95,
    "gamma_traj": 0.6,
    "episode_score": "episode_reward",
    "episode_baseline": "group",
}
#: Single-episode RL baselines: one episode per sample, groups of 24 so that a
#: step sees as many trajectories as MAGE's 8 x 3 (METHOD.md section 6); they
#: are evaluated over K independent attempts without reflection.
_SINGLE = {**_MAGE, "episodes_per_meta_episode": 1, "reflect": False, "reward_variant": "single_episode",
           "group_size": 24}

PRESETS: dict[str, dict[str, Any]] = {
    "mage": _MAGE,
    "lamer": {**_MAGE, "reward_variant": "cumulative"},
    "gigpo": _SINGLE,
    "grpo": {**_SINGLE, "advantage": "grpo"},
    # Beyond the paper (issue 12): MAGE's meta-episodes (K episodes, memory) trained on
    # the objective its differential rewards telescope to, the final episode's reward,
    # given undiscounted to every decision, with a mean baseline per (opponent, seat,
    # episode index, turn) over the whole batch and no std division. On the embedded
    # model and fresh Kuhn deals this learned faster than MAGE's discounted
    # differential return, which credits the last hand with R_K - R_{K-1} only
    # (README, "Does it learn?"; the reward_design grid compares them).
    "mage_final_return": {**_MAGE, "reward_variant": "final", "step_weight": 0.0, "episode_score": "return",
                          "episode_baseline": "group_episode_turn", "episode_norm": "mean_norm",
                          "group_scope": "batch"},
    # Ablations of METHOD.md section 9.
    "ablation_cumulative": {**_MAGE, "reward_variant": "cumulative"},
    "ablation_single_episode_reward": {**_MAGE, "reward_variant": "single_episode"},
    "ablation_non_stationary_grouping": {**_MAGE, "grouping": "non_stationary"},
    "ablation_local_anchor": {**_MAGE, "anchor": "local"},
    "ablation_fixed_opponent": _MAGE,
    "ablation_pattern_skewed": _MAGE,
}

#: Population presets that a method implies (population ablations).
PRESET_POPULATIONS: dict[str, dict[str, str]] = {
    "ablation_fixed_opponent": {"tic_tac_toe": "fixed_mcts", "kuhn_poker": "fixed_intermediate"},
    "ablation_pattern_skewed": {"tic_tac_toe": "pattern_skewed"},
}


def preset_values(name: str) -> dict[str, Any]:
    if name not in PRESETS:
        raise ValueError(f"unknown method preset {name!r}; presets: {', '.join(PRESETS)}")
    return dict(PRESETS[name])
