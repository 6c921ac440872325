"""``env.alfworld``, ``evaluation.ood.alfworld`` and ``data.alfworld`` of params.yaml."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from mage_core.envs.params import PenaltyConfig
from mage_core.schema import NonNegativeFloat, NonNegativeInt, PositiveInt, Strict


class AlfWorldConfig(PenaltyConfig):
    """ALFWorld (docs/method.md section 10: 10 turns, 1024 response tokens, no length
    penalty); the game folder (``mage alfworld generate``, or the official json_2.1.1)."""

    data_path: str = "data/alfworld"
    max_turns: PositiveInt = 10
    success_reward: Annotated[float, Field(gt=0)] = 10.0
    length_penalty_coef: NonNegativeFloat = 0.0
    max_response_tokens: PositiveInt = 1024

    def settings(self) -> Any:
        from mage_core.envs.alfworld.env import AlfWorldSettings

        return AlfWorldSettings(data_path=self.data_path, max_turns=self.max_turns,
                                success_reward=self.success_reward)


class AlfWorldSuiteConfig(Strict):
    """An out-of-domain ALFWorld suite: the games of a split never trained on."""

    split: Literal["eval_out_of_distribution"] = "eval_out_of_distribution"


class AlfWorldDataConfig(Strict):
    """``data.alfworld``: the generated ALFWorld games (``mage data generate alfworld``): games per task type."""

    seed: NonNegativeInt = 0
    train: NonNegativeInt = 2
    valid_seen: NonNegativeInt = 1
    valid_unseen: NonNegativeInt = 1
    task_types: list[Literal["pick_and_place_simple", "look_at_obj_in_light", "pick_clean_then_place_in_recep",
                             "pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep",
                             "pick_two_obj_and_place"]] = Field(
        default_factory=lambda: ["pick_and_place_simple", "look_at_obj_in_light", "pick_clean_then_place_in_recep",
                                 "pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep",
                                 "pick_two_obj_and_place"], min_length=1)
