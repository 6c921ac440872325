"""``env.minesweeper`` and ``evaluation.ood.minesweeper`` of params.yaml."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, ValidationInfo, field_validator

from mage_core.envs.params import PenaltyConfig
from mage_core.schema import NonNegativeFloat, PositiveInt, Strict


class MineSweeperConfig(PenaltyConfig):
    """LaMer's settings: 6 x 6, 3 mines, 7 turns; its rewards (docs/environments.md)."""

    board_size: Annotated[int, Field(ge=3, le=9)] = 6
    num_mines: PositiveInt = 3
    max_turns: PositiveInt = 7
    reveal_reward: float = 0.5
    cascade_reward: float = 2.0
    win_reward: float = 10.0
    mine_reward: float = -0.1
    length_penalty_coef: NonNegativeFloat = 0.0
    max_response_tokens: PositiveInt = 1024

    @field_validator("num_mines")
    @classmethod
    def _room_to_play(cls, v: int, info: ValidationInfo) -> int:
        # ``draw_board`` keeps the first reveal safe and needs one more safe cell, or the
        # game is won before the agent moves: at most board_size ** 2 - 2 mines.
        size = info.data.get("board_size")
        if size is not None and v > size ** 2 - 2:
            raise ValueError(f"at most {size ** 2 - 2} on a {size} x {size} board (env.minesweeper.board_size "
                             f"{size}): the first reveal is safe and one more safe cell must be left to play; "
                             f"got {v}")
        return v

    def settings(self) -> Any:
        from mage_core.envs.minesweeper.env import MineSweeperSettings

        return MineSweeperSettings(**self.model_dump(exclude=set(PenaltyConfig.model_fields)))


class MineSweeperSuiteConfig(Strict):
    """An out-of-domain MineSweeper suite: boards with another number of mines."""

    num_mines: PositiveInt
