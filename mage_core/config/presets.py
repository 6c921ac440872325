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

#: LaMer (Jiang et al. 2025, arXiv 2512.16848), the paper's meta-RL baseline: MAGE's
#: meta-episodes and step return with LaMer's cumulative reward ("Cumulative Return
#: (LAMER-style): Uses absolute performance, [R_k], with cross-episode propagation",
#: MAGE paper section 4.4.1; docs/method.md section 4) and without MAGE's agent-specific
#: normalization, i.e. groups (and GiGPO anchor clusters) that mix opponents. The
#: paper credits that normalization to MAGE alone: "We further introduce an
#: agent-specific advantage normalization technique to handle divergent reward
#: distributions across opponents" (section 1); "Unlike previous works that focus on
#: exploration, MAGE leverages population-based training and agent-specific
#: normalization" (section 2, on LaMer); "In Tic-Tac-Toe, MAGE achieves a dominant
#: terminal success rate against MCTS-100, significantly outperforming LAMER [...]
#: These results validate that Opponent-Specific Advantage Normalization effectively
#: stabilizes meta-learning across heterogeneous strategy populations" (section 4.2);
#: and it calls stationary grouping "standard MAGE" against "Non-Stationary Grouping
#: (mixed archetypes)" (section 4.4.2). LaMer itself is single-agent: its groups are
#: the trials of one task, blind to who the opponent is. The paper says nothing else
#: about how LaMer was trained, so every other key is MAGE's (advantage, anchor, group
#: size, discounts). ``ablation_cumulative`` keeps MAGE's grouping instead: it isolates
#: the reward design (docs/method.md section 9).
_LAMER: dict[str, Any] = {**_MAGE, "reward_variant": "cumulative", "grouping": "non_stationary"}

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
