"""``env.minesweeper`` and ``evaluation.ood.minesweeper`` of params.yaml: MineSweeper's settings."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, ValidationInfo, field_validator

from mage_core.envs.params import EnvSettings
from mage_core.schema import FiniteFloat, NonNegativeFloat, PositiveInt, Strict


class MineSweeperSettings(EnvSettings):
    """LaMer's settings: 6 x 6, 3 mines, 7 turns; its rewards (docs/environments.md)."""

    board_size: Annotated[int, Field(ge=3, le=9)] = 6
    num_mines: Annotated[PositiveInt, Field(validate_default=True)] = 3
    max_turns: PositiveInt = 7
    reveal_reward: FiniteFloat = 0.5
    cascade_reward: FiniteFloat = 2.0
    win_reward: FiniteFloat = 10.0
    mine_reward: FiniteFloat = -0.1
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

    def return_bounds(self) -> tuple[float, float]:
        """Bounds of one episode's task reward: every turn a reveal, the last one a mine or
        the win (docs/method.md section 3)."""
        reveals = (self.reveal_reward, self.cascade_reward, 0.0)
        low = self.max_turns * min(reveals) + min(self.mine_reward, 0.0)
        high = self.max_turns * max(reveals) + max(self.win_reward, 0.0)
        return low, high


class MineSweeperSuiteConfig(Strict):
    """An out-of-domain MineSweeper suite: boards with another number of mines."""

    num_mines: PositiveInt
