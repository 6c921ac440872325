"""Kuhn Poker as a task (``mage_core.envs.task``): read in chips, exact values and ceilings."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any


from mage_core.envs.task import Task

if TYPE_CHECKING:
    import numpy as np


def _new_game(rng: np.random.Generator) -> Any:
    from mage_core.envs.kuhn_poker.rules import initial_state

    return initial_state(rng)


def _reward_bounds(settings: Any) -> tuple[float, float]:
    chips = 2 * settings.reward_per_chip  # ante + bet
    return -chips, chips


TASK = Task(
    name="kuhn_poker",
    title="Kuhn Poker",
    report_order=0,
    env_class="mage_core.envs.kuhn_poker.env:KuhnPokerEnv",
    reward_bounds=_reward_bounds,
    new_game=_new_game,
    opponents="mage_core.opponents.registry:KUHN_POKER",
    headline="chips",
    score_unit="chips",
    reward_scale=lambda settings: settings.reward_per_chip,
    episode_noun="hand",
    exact_values=True,
    strategy_probes=True,
)
