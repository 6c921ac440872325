"""How a run plays its meta-episodes: the memory, K and restart of its method, in training
and in evaluation, and the evaluation protocol two runs must share to be compared paired.

The trainer builds its rollouts from ``meta_settings`` and ``evaluation_settings``; the report
matches a trained run with the evaluation-only run of the same protocol (``protocol_key``):
its starting model, played exactly as the trained run is evaluated (docs/baselines.md, "The
starting point under each method's protocol").
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from mage_core.config import Config
from mage_core.rollout.meta_episode import MetaSettings

#: What each prompting or memory baseline remembers (``algorithm.agent``):
#: memory mode, retrieval, after which episodes it reflects. Every other agent (a trained
#: policy, ``frozen``) remembers what ``policy.memory`` says.
AGENT_MEMORY = {
    "reflexion": ("reflection_only", "none", "failure"),
    "a_mem": ("reflection_only", "notes", "every"),
    "memento": ("history_only", "cases", "every"),
}


def meta_settings(cfg: Config, game: str, num_episodes: int, reflect: bool) -> MetaSettings:
    """The meta-episode settings of ``cfg``'s method. A baseline agent fixes its own
    memory (``AGENT_MEMORY``); a generated reflection needs the paper style (free
    text), so compact-style baselines reflect with the structured summary."""
    env_cfg = getattr(cfg.env, game)
    memory, retrieval, reflect_on = cfg.policy.memory if reflect else "none", "none", "every"
    reflections = cfg.policy.reflections
    agent = cfg.algorithm.agent
    if agent in AGENT_MEMORY and reflect:
        memory, retrieval, reflect_on = AGENT_MEMORY[agent]
        reflections = "generated" if cfg.policy.prompt_style == "paper" else "summary"
    return MetaSettings(
        num_episodes=num_episodes,
        reflect=reflect,
        restart=cfg.rollout.restart,
        early_stop=cfg.rollout.early_stop,
        style=cfg.policy.prompt_style,
        memory=memory,  # type: ignore[arg-type]
        reflections=reflections,
        action_mode=cfg.policy.action_mode,
        max_remark_chars=cfg.policy.max_remark_chars,
        moves_per_turn=cfg.env.sokoban.moves_per_turn,
        invalid_penalty=env_cfg.invalid_action_penalty,
        length_penalty_coef=env_cfg.length_penalty_coef,
        max_response_tokens=env_cfg.max_response_tokens,
        retrieval=retrieval,  # type: ignore[arg-type]
        reflect_on=reflect_on,  # type: ignore[arg-type]
    )


def evaluation_settings(cfg: Config) -> MetaSettings:
    """How ``cfg``'s method is evaluated: meta-RL methods with their own K and memory;
    single-episode methods over K = 3 (at least their own K) attempts without memory
    (docs/method.md section 9)."""
    algo = cfg.algorithm
    k = algo.episodes_per_meta_episode if algo.reflect else max(algo.episodes_per_meta_episode, 3)
    return meta_settings(cfg, cfg.env.name, k, algo.reflect)


def protocol_key(cfg: Config) -> str:
    """What a report set's figures depend on besides the policy's training: the task and its
    settings, the starting model, how the meta-episodes are played (``evaluation_settings``),
    the evaluation's sampling, seed and size. Two runs with the same key played the same
    tasks in the same order under the same protocol, so their trial tables pair meta-episode
    by meta-episode; a trained run and an evaluation-only run with the same key differ only
    in the training."""
    game = cfg.env.name
    data = cfg.model_dump(mode="json")
    evaluation = {k: v for k, v in data["evaluation"].items()
                  if k not in ("ood", "selection_seed", "meta_episodes_per_opponent_seat")}
    return json.dumps({
        "env": game, "env_settings": data["env"][game], "population": data["population"].get(game),
        "model": data["model"], "start": cfg.init_model(), "policy": data["policy"],
        "episodes": dataclasses.asdict(evaluation_settings(cfg)), "evaluation": evaluation,
        "report_per_pair": cfg.reproduce.eval_per_pair,
    }, sort_keys=True, default=_plain)


def _plain(value: Any) -> Any:
    return str(value)
