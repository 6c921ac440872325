"""Sokoban as a task (``mage_core.envs.task``): generated levels, OOD suites by box count."""

from __future__ import annotations

from typing import Any

from mage_core.envs.task import Task, TaskPrompt


def _reward_bounds(s: Any) -> tuple[float, float]:
    moves = s.max_turns * s.moves_per_turn
    worst_move = min(s.step_penalty, 0.0) + min(s.box_off_target, 0.0)
    best_total = 3 * max(s.box_on_target, 0.0) + max(s.all_boxes_on_target, 0.0)  # at most 3 boxes
    return moves * worst_move, best_total + moves * max(s.step_penalty, 0.0)


TASK = Task(
    name="sokoban",
    title="Sokoban",
    report_order=3,
    params="mage_core.envs.sokoban.params:SokobanSettings",
    prompt=TaskPrompt(
        tag="sokoban",
        rules=(
            "You are an expert Sokoban player.\n"
            "# Rules\n"
            "- You (P) move up, down, left or right on the grid; walls (#) block you.\n"
            "- Walking into a box (X) pushes it one cell if the cell behind it is free; boxes cannot be "
            "pulled.\n"
            "- The level is solved when every box stands on a target (O); a box on a target shows as √.\n"
            "# Goal\n"
            "You get several attempts at the same level. Learn from the earlier attempts and solve it."
        ),
        action_format=(
            "Give up to {moves} moves separated by commas inside <action> </action> tags, e.g. <action>up, "
            "left</action>."
        ),
    ),
    env_class="mage_core.envs.sokoban.env:SokobanEnv",
    reward_bounds=_reward_bounds,
    ood_param="num_boxes",
    ood_suite="mage_core.envs.sokoban.params:SokobanSuiteConfig",
    ood_defaults={"one_box": {"num_boxes": 1}, "three_boxes": {"num_boxes": 3}},
    reference_keys=("env.sokoban.dim_room", "env.sokoban.num_boxes", "env.sokoban.moves_per_turn",
                    "env.sokoban.min_solution_moves", "env.sokoban.max_solution_moves"),
    method_values={"gamma_traj": 0.9},  # as MAGE's Sokoban training script (docs/method.md section 4)
    expert="mage_core.envs.sokoban.expert:act",
    seeded_tasks=True,
)
