"""``env.tic_tac_toe`` of params.yaml: Tic-Tac-Toe's settings."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, ValidationInfo, field_validator

from mage_core.envs.params import EnvSettings
from mage_core.schema import FiniteFloat, PositiveInt


class TicTacToeSettings(EnvSettings):
    """Episode settings (docs/method.md section 10: 8 turns; section 3: +-10 / 0)."""

    max_turns: PositiveInt = 8
    win_reward: FiniteFloat = 10.0
    loss_reward: FiniteFloat = -10.0
    draw_reward: Annotated[FiniteFloat, Field(validate_default=True)] = 0.0

    @field_validator("draw_reward")
    @classmethod
    def _rewards_ordered(cls, v: float, info: ValidationInfo) -> float:
        win, loss = info.data.get("win_reward"), info.data.get("loss_reward")
        if win is not None and loss is not None and not loss <= v <= win:
            raise ValueError(f"rewards must satisfy loss_reward <= draw_reward <= win_reward, got {loss} / {v} / {win}")
        return v
