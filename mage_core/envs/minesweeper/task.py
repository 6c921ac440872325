"""MineSweeper as a task (``mage_core.envs.task``): seeded boards, OOD suites by mine count."""

from __future__ import annotations

from typing import Any, Iterable

from mage_core.envs.task import Task, TaskPrompt


def _reward_bounds(settings: Any) -> tuple[float, float]:
    return settings.return_bounds()


def _action_words(env: Any) -> Iterable[str]:
    """Every cell: a later board has other cells closed than the first."""
    size = env.settings.board_size
    return (f"({r},{c})" for r in range(1, size + 1) for c in range(1, size + 1))


TASK = Task(
    name="minesweeper",
    title="MineSweeper",
    report_order=5,
    params="mage_core.envs.minesweeper.params:MineSweeperSettings",
    prompt=TaskPrompt(
        tag="mines",
        rules=(
            "You are an expert MineSweeper player.\n"
            "# Rules\n"
            "- The board is a grid of cells, some of them hiding mines; closed cells show ?. Rows and columns "
            "are numbered from 1 at the top left.\n"
            "- Each turn you open ONE closed cell. An open cell shows how many of its eight neighbours hide "
            "a mine, or . for none, in which case its neighbours open too.\n"
            "- Opening a mine loses the board. The board is cleared when every cell without a mine is open.\n"
            "# Goal\n"
            "You get several attempts at the same board. Learn from the earlier attempts where the mines "
            "are and clear it."
        ),
        action_format=("Choose ONE closed cell inside <action> </action> tags as (row, col), e.g. "
                       "<action>(2, 3)</action>."),
    ),
    env_class="mage_core.envs.minesweeper.env:MineSweeperEnv",
    reward_bounds=_reward_bounds,
    action_words=_action_words,
    ood_param="num_mines",
    ood_suite="mage_core.envs.minesweeper.params:MineSweeperSuiteConfig",
    ood_defaults={"five_mines": {"num_mines": 5}},
    reference_keys=("env.minesweeper.board_size", "env.minesweeper.num_mines", "env.minesweeper.max_turns"),
    expert="mage_core.envs.minesweeper.expert:act",
    expert_memory=True,
    known_ceiling="mage_core.envs.minesweeper.expert:clearable",
    seeded_tasks=True,
)
