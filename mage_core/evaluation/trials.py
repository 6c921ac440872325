"""The trial table: one row per played episode, the contract between stages.

Evaluation writes it (``mage evaluate`` -> ``trials.parquet``), the metrics of
``meta_eval.summarize_trials`` are computed from it, the data contracts of
``evaluation.contracts`` validate it, and the aggregation stage reads it back.
Rows are plain dicts so that training-time evaluation needs no pandas.

Columns (``TRIAL_COLUMNS``):

- ``suite``: evaluation suite (``in_domain``, ``ood_mcts_1000``, ...);
- ``opponent`` / ``seat``: the opponent's name and the agent's seat (``first``,
  ``second``; ``none`` for single-agent tasks);
- ``meta_episode``: index of the meta-episode within its suite; ``task_seed``;
- ``episode``: 1-based episode index within the meta-episode (1..K);
- ``reward``: the episode's task reward R_k in the game's reward scale;
  ``score``: the same in the headline unit (Kuhn: chips; otherwise = reward);
- ``success`` / ``draw``: the episode's outcome;
- ``invalid``: invalid actions in the episode; ``turns``: play turns taken;
- ``tokens``: response tokens the policy produced for the episode (its play
  turns and the reflection that prepared it; a constrained choice counts the
  chosen candidate's tokens).
"""

from __future__ import annotations

from typing import Any, Sequence

from mage_core.envs.base import Outcome
from mage_core.rollout.meta_episode import MetaEpisode

SEAT_NAMES = {0: "first", 1: "second"}
#: The opponent and seat columns of single-agent tasks.
NONE = "none"

TRIAL_COLUMNS = ("suite", "opponent", "seat", "meta_episode", "task_seed", "episode", "reward", "score", "success",
                 "draw", "invalid", "turns", "tokens")


def _decision_tokens(decision: Any) -> int:
    if decision.response_ids is not None:
        return len(decision.response_ids)
    if decision.candidate_ids is not None and decision.choice is not None:
        return len(decision.candidate_ids[decision.choice])
    return 0


def trial_rows(metas: Sequence[MetaEpisode], suite: str, reward_per_unit: float = 1.0) -> list[dict[str, Any]]:
    """One row per played episode of finished meta-episodes (module docstring)."""
    if reward_per_unit <= 0:
        raise ValueError(f"reward_per_unit must be positive, got {reward_per_unit}")
    rows: list[dict[str, Any]] = []
    for index, meta in enumerate(metas):
        if not meta.done:
            raise ValueError(f"meta-episode {index} of suite {suite!r} is not finished")
        spec = meta.spec
        opponent = spec.opponent if spec.opponent is not None else NONE
        seat = SEAT_NAMES[spec.agent_seat] if spec.opponent is not None else NONE
        tokens = [0] * len(meta.episodes)
        for d in getattr(meta, "decisions", ()):
            if d.episode < len(tokens):
                tokens[d.episode] += _decision_tokens(d)
        for k, e in enumerate(meta.episodes):
            rows.append({
                "suite": suite, "opponent": opponent, "seat": seat, "meta_episode": index,
                "task_seed": int(spec.task_seed), "episode": k + 1, "reward": float(e.reward),
                "score": float(e.reward) / reward_per_unit, "success": e.outcome is Outcome.WIN,
                "draw": e.outcome is Outcome.DRAW, "invalid": int(e.num_invalid), "turns": int(e.num_turns),
                "tokens": tokens[k],
            })
    return rows
