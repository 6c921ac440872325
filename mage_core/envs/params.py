"""What every task's section of params.yaml (``env.<name>``) shares: the penalties.

Each environment's own section is a subclass in its folder (``envs/<name>/params.py``),
named by its ``Task.params``; ``mage_core.config`` assembles ``env`` from the registry.
"""

from __future__ import annotations

from typing import Any

from mage_core.schema import NonNegativeFloat, PositiveInt, Strict


class PenaltyConfig(Strict):
    """Per-task penalties (docs/method.md section 3 and 10)."""

    invalid_action_penalty: NonNegativeFloat = 0.5
    length_penalty_coef: NonNegativeFloat = 2.0
    max_response_tokens: PositiveInt = 3072

    def settings(self) -> Any:
        """The environment's frozen settings (what ``make_env`` takes)."""
        raise NotImplementedError(f"{type(self).__name__} does not say how to build its environment's settings")
