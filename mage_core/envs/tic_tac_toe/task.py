"""Tic-Tac-Toe as a task (``mage_core.envs.task``): a two-player game that can end level.

Its exact analysis (best responses to the population, ``best_response.py``) lives in this
folder, reached through ``analyze`` (``commands.py``: ``mage ttt analyze``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mage_core.envs.task import Task, TaskPrompt

if TYPE_CHECKING:
    import numpy as np


def _new_game(rng: np.random.Generator) -> Any:
    from mage_core.envs.tic_tac_toe.rules import initial_state

    return initial_state()  # no chance: the empty board


def _reward_bounds(settings: Any) -> tuple[float, float]:
    values = (settings.win_reward, settings.loss_reward, settings.draw_reward, 0.0)
    return min(values), max(values)


TASK = Task(
    name="tic_tac_toe",
    title="Tic-Tac-Toe",
    report_order=1,
    params="mage_core.envs.tic_tac_toe.params:TicTacToeSettings",
    prompt=TaskPrompt(
        tag="ttt",
        rules=(
            "You are an expert Tic-Tac-Toe player.\n"
            "# Rules\n"
            "- A 3x3 board; X moves first. Players alternate placing their mark on an empty cell.\n"
            "- Three of your marks in a row, column or diagonal wins; a full board without a line is a "
            "draw.\n"
            "- Cells are (row, col) with rows and columns numbered 1 to 3 from the top left.\n"
            "# Goal\n"
            "You play several games against the same opponent, whose style you are not told. Learn its "
            "habits from the earlier games and win."
        ),
        action_format=(
            "Choose ONE empty cell inside <action> </action> tags as (row, col), e.g. <action>(2, "
            "3)</action>."
        ),
    ),
    env_class="mage_core.envs.tic_tac_toe.env:TicTacToeEnv",
    reward_bounds=_reward_bounds,
    new_game=_new_game,
    opponents="mage_core.opponents.registry:TIC_TAC_TOE",
    draws=True,
    analyze="mage_core.envs.tic_tac_toe.commands:analyze",
    reference_keys=("train.kl_estimator", "population.tic_tac_toe"),
)
