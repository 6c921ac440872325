"""``env.kuhn_poker`` of params.yaml."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from mage_core.envs.params import PenaltyConfig
from mage_core.schema import PositiveInt


class KuhnPokerConfig(PenaltyConfig):
    max_turns: PositiveInt = 6
    reward_per_chip: Annotated[float, Field(gt=0)] = 5.0
    max_response_tokens: PositiveInt = 4096

    def settings(self) -> Any:
        from mage_core.envs.kuhn_poker.env import KuhnPokerSettings

        return KuhnPokerSettings(max_turns=self.max_turns, reward_per_chip=self.reward_per_chip)
