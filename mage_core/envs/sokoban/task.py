"""Sokoban as a task (``mage_core.envs.task``): generated levels, OOD suites by box count."""

from __future__ import annotations

from typing import Any

from mage_core.envs.task import Task


def _reward_bounds(s: Any) -> tuple[float, float]:
    moves = s.max_turns * s.moves_per_turn
    worst_move = min(s.step_penalty, 0.0) + min(s.box_off_target, 0.0)
    best_total = 3 * max(s.box_on_target, 0.0) + max(s.all_boxes_on_target, 0.0)  # at most 3 boxes
    return moves * worst_move, best_total + moves * max(s.step_penalty, 0.0)


TASK = Task(
    name="sokoban",
    title="Sokoban",
    report_order=3,
    env_class="mage_core.envs.sokoban.env:SokobanEnv",
    reward_bounds=_reward_bounds,
    ood_param="num_boxes",
)
