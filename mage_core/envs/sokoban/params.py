"""``env.sokoban`` and ``evaluation.ood.sokoban`` of params.yaml: Sokoban's settings."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, ValidationInfo, field_validator

from mage_core.envs.params import EnvSettings
from mage_core.schema import FiniteFloat, NonNegativeFloat, PositiveInt, Strict


class SokobanSettings(EnvSettings):
    """Paper defaults (docs/method.md section 10); rewards as in gym-sokoban."""

    dim_room: Annotated[int, Field(ge=5, le=10)] = 6
    num_boxes: Annotated[int, Field(ge=1, le=3)] = 2
    max_turns: PositiveInt = 7
    moves_per_turn: Annotated[int, Field(ge=1, le=5)] = 3  # 4**n action texts of n moves
    min_solution_moves: PositiveInt = 5
    max_solution_moves: Annotated[PositiveInt, Field(validate_default=True)] = 21
    step_penalty: FiniteFloat = -0.1
    box_on_target: FiniteFloat = 1.0
    box_off_target: FiniteFloat = -1.0
    all_boxes_on_target: FiniteFloat = 10.0
    length_penalty_coef: NonNegativeFloat = 1.0
    max_response_tokens: PositiveInt = 4096

    @field_validator("max_solution_moves")
    @classmethod
    def _bounds_ordered(cls, v: int, info: ValidationInfo) -> int:
        low = info.data.get("min_solution_moves")
        if low is not None and v < low:
            raise ValueError(f"must be >= min_solution_moves ({low}), got {v}")
        return v


class SokobanSuiteConfig(Strict):
    """An out-of-domain Sokoban suite: levels with another number of boxes."""

    num_boxes: Annotated[int, Field(ge=1, le=3)]
