"""``env.kuhn_poker`` of params.yaml: Kuhn Poker's settings."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from mage_core.envs.params import EnvSettings
from mage_core.schema import FinitePositiveFloat, PositiveInt


class KuhnPokerSettings(EnvSettings):
    """Paper settings (docs/method.md section 10: 6 agent turns; section 3: 5 reward per chip)."""

    max_turns: Annotated[int, Field(ge=2)] = 6  # the agent may need 2 turns (check, then answer a bet)
    reward_per_chip: FinitePositiveFloat = 5.0
    max_response_tokens: PositiveInt = 4096
