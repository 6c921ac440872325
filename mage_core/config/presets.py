"""Named methods: the paper's baselines and ablations (docs/method.md section 9).

A preset fills the ``algorithm`` keys a params file leaves unset; keys given
explicitly win. A few values depend on the game (the task's ``Task.method_values``: gamma_traj
0.9 on Sokoban); ``preset_values(name, game)`` applies them, and the config
resolves a preset for ``env.name``. Population ablations also name the
population presets they train against (applied unless params.yaml names a
population itself). ``tests/unit/test_presets.py`` pins every preset to
docs/method.md.
"""

from __future__ import annotations

from typing import Any

#: The MAGE recipe (docs/method.md sections 1-5).
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
    "agent": "trained",
    "retrieve_k": 3,
}
#: Single-episode RL baselines: one episode per sample, groups of 24 so that a
#: step sees as many trajectories as MAGE's 8 x 3 (docs/method.md section 6); they
#: are evaluated over K independent attempts without reflection.
_SINGLE = {**_MAGE, "episodes_per_meta_episode": 1, "reflect": False, "reward_variant": "single_episode",
           "group_size": 24}

#: LaMer (Jiang et al. 2025, arXiv 2512.16848), the paper's meta-RL baseline, as LaMer
#: publishes it: MAGE's meta-episodes (K attempts, reflections, GiGPO) with LaMer's return, the
#: raw rewards with each later episode's return added from its start, discounted by gamma_traj
#: per boundary (reward variant ``lamer``: docs/method.md section 4), and R_k as the episode
#: term's score. Its grouping is its public code's: the rollouts of one task form a group
#: (``uid``), and in MAGE's code, where LaMer is the baseline, each task's rollouts face one
#: opponent, so that is MAGE's stationary grouping; the paper says nothing else about how LaMer
#: was trained, so every other key is MAGE's (advantage, anchor, group size, discounts).
#: ``ablation_cumulative`` is the MAGE paper's "Cumulative Return (LAMER-style)": the raw
#: rewards through MAGE's (and LaMer's code's) recursion, which also discounts a later episode's
#: return by gamma_step for every step left in the current one; ``ablation_non_stationary_grouping``
#: mixes opponents in a group. docs/method-notes.md lists the differences.
_LAMER: dict[str, Any] = {**_MAGE, "reward_variant": "lamer"}

PRESETS: dict[str, dict[str, Any]] = {
    "mage": _MAGE,
    "lamer": _LAMER,
    "gigpo": _SINGLE,
    "grpo": {**_SINGLE, "advantage": "grpo"},
    # Beyond the paper (issue 12): MAGE's meta-episodes (K episodes, memory) trained on
    # the objective its differential rewards telescope to, the final episode's reward,
    # given undiscounted to every decision, with a mean baseline per (opponent, seat,
    # episode index, turn) over the whole batch and no std division (an explicit
    # algorithm.episode_norm overrides that: the CPU default's params.yaml sets mean_std_norm
    # for every method, and the report's settings table marks it). On the embedded
    # model and fresh Kuhn deals this learned faster than MAGE's discounted
    # differential return, which credits the last hand with R_K - R_{K-1} only
    # (docs/learning.md; the reward_design grid compares them).
    "mage_final_return": {**_MAGE, "reward_variant": "final", "step_weight": 0.0, "episode_score": "return",
                          "episode_baseline": "group_episode_turn", "episode_norm": "mean_norm",
                          "group_scope": "batch"},
    # The prompting and memory baselines of Table 1 (docs/method.md section 9): no weight
    # updates, evaluated with the same suites and K. ReAct acts in each attempt
    # afresh (evaluated, as the single-episode methods, over K attempts without
    # memory); Reflexion, A-MEM and Memento remember across MAGE's K episodes.
    "react": {**_SINGLE, "agent": "react"},
    "reflexion": {**_MAGE, "agent": "reflexion"},
    "a_mem": {**_MAGE, "agent": "a_mem"},
    "memento": {**_MAGE, "agent": "memento"},
    # The starting model (the task's warm start, where warm_start.tasks lists it; else the
    # fresh model), never updated, played under MAGE's and LaMer's protocol: K attempts, each
    # remembering the earlier ones as policy.memory says. What a MAGE or LaMer run is compared
    # with, paired (ReAct is the same model under GiGPO's and GRPO's protocol: K attempts
    # without memory); docs/baselines.md.
    "warm_start": {**_MAGE, "agent": "frozen"},
    # Ablations of docs/method.md section 9 (one change to MAGE each).
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


def preset_values(name: str, game: str | None = None) -> dict[str, Any]:
    """The ``algorithm`` values of preset ``name``, with ``game``'s own values
    (``Task.method_values``: Sokoban's gamma_traj 0.9, docs/method.md section 4) when a
    game is given."""
    if name not in PRESETS:
        raise ValueError(f"unknown method preset {name!r}; presets: {', '.join(PRESETS)}")
    if game is None:
        return dict(PRESETS[name])
    from mage_core.envs.registry import task

    return {**PRESETS[name], **task(game).method_values}
