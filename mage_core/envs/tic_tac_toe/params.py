"""``env.tic_tac_toe`` of params.yaml."""

from __future__ import annotations

from typing import Any

from mage_core.envs.params import PenaltyConfig
from mage_core.schema import PositiveInt


class TicTacToeConfig(PenaltyConfig):
    max_turns: PositiveInt = 8
    win_reward: float = 10.0
    loss_reward: float = -10.0
    draw_reward: float = 0.0

    def settings(self) -> Any:
        from mage_core.envs.tic_tac_toe.env import TicTacToeSettings

        return TicTacToeSettings(
            max_turns=self.max_turns,
            win_reward=self.win_reward,
            loss_reward=self.loss_reward,
            draw_reward=self.draw_reward,
        )
