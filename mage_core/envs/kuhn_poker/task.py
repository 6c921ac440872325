"""Kuhn Poker as a task (``mage_core.envs.task``): read in chips, exact values and ceilings."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mage_core.envs.task import Task, TaskPrompt

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
    params="mage_core.envs.kuhn_poker.params:KuhnPokerSettings",
    prompt=TaskPrompt(
        tag="kuhn",
        rules=(
            "You are an expert Kuhn Poker player.\n"
            "# Rules\n"
            "- Two players, a deck of three cards: K beats Q beats J. Each player antes 1 chip and gets one "
            "private card; the third card stays hidden.\n"
            "- Player 0 acts first. PASS puts no chip in (check, or fold when facing a bet); BET puts 1 "
            "chip in (bet, or call when facing a bet).\n"
            "- A PASS after a BET folds: the bettor takes the pot. Two PASSes or two BETs go to showdown: "
            "the higher card takes the pot.\n"
            "# Goal\n"
            "You play several hands against the same opponent, whose style you are not told. Learn how it "
            "plays from the earlier hands and win as many chips as you can."
        ),
        action_format=(
            "Choose ONE action, PASS or BET, inside <action> </action> tags, e.g. <action>BET</action>."
        ),
    ),
    env_class="mage_core.envs.kuhn_poker.env:KuhnPokerEnv",
    reward_bounds=_reward_bounds,
    new_game=_new_game,
    opponents="mage_core.opponents.registry:KUHN_POKER",
    headline="chips",
    reward_scale=lambda settings: settings.reward_per_chip,
    episode_noun="hand",
    exact_values=True,
    strategy_probes=True,
    reference_keys=("train.kl_estimator", "population.kuhn_poker", "evaluation.ood.kuhn_poker"),
)
