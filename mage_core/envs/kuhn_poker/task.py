"""Kuhn Poker as a task (``mage_core.envs.task``): read in chips, exact values and ceilings.

Its analyses live in this folder and are reached through the hooks below: the suites'
ceilings (``ceilings.py``), the greedy policy's exact value (``exact_greedy.py``), the
strategy probes (``probes.py``, ``second_hand.py``), the league's members (``league.py``)
and its commands (``commands.py``: ``mage kuhn analyze``, ``mage kuhn probe``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mage_core.envs.task import Task, TaskExact, TaskProbes, TaskPrompt

if TYPE_CHECKING:
    import numpy as np

_HERE = "mage_core.envs.kuhn_poker"


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
    exact_values=TaskExact(
        suite=f"{_HERE}.ceilings:suite_figures",
        greedy_cases=f"{_HERE}.exact_greedy:exact_greedy_cases",
        greedy_values=f"{_HERE}.exact_greedy:greedy_values",
    ),
    strategy_probes=TaskProbes(
        strategy=f"{_HERE}.probes:first_hand_strategy",
        metrics=f"{_HERE}.probes:first_hand_metrics",
        suite=f"{_HERE}.probes:suite_probes",
        command=f"{_HERE}.commands:probe",
        league_members=f"{_HERE}.league:league_members",
        league_opponents=f"{_HERE}.league:league_opponents",
    ),
    analyze=f"{_HERE}.commands:analyze",
    reference_keys=("train.kl_estimator", "population.kuhn_poker", "evaluation.ood.kuhn_poker"),
)
