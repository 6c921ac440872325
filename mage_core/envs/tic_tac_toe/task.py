"""Tic-Tac-Toe as a task (``mage_core.envs.task``): a two-player game that can end level."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any


from mage_core.envs.task import Task

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
    env_class="mage_core.envs.tic_tac_toe.env:TicTacToeEnv",
    reward_bounds=_reward_bounds,
    new_game=_new_game,
    opponents="mage_core.opponents.registry:TIC_TAC_TOE",
    draws=True,
)
