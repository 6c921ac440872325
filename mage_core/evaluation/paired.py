"""Two runs compared on the same tasks, meta-episode by meta-episode.

A trained run and the evaluation-only run of its starting model under the same protocol
(``rollout.protocol.protocol_key``: the same tasks in the same order, the same memory, K and
restart) played the same report set; the difference of their final-episode successes on each
meta-episode, averaged, says what the training added, with a 95% normal interval of the mean
paired difference (the two runs' luck on a task cancels where both win or both lose it).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from mage_core.evaluation.stats import mean_interval

#: The columns that name a meta-episode of a suite (the same in both runs' trial tables).
META_EPISODE = ["opponent", "seat", "meta_episode"]


@dataclass(frozen=True)
class PairedDifference:
    """``mean`` of (run's final success - baseline's) over ``n`` meta-episodes, its 95% interval."""

    run_final: float
    baseline_final: float
    mean: float
    low: float
    high: float
    n: int

    @property
    def verdict(self) -> str:
        """``above`` / ``below`` when the interval clears 0, else ``not resolved``."""
        return "above" if self.low > 0 else "below" if self.high < 0 else "not resolved"


def final_success(trials: pd.DataFrame, suite: str, num_episodes: int) -> pd.DataFrame:
    """One row per meta-episode of ``suite``: its task seed and whether its episode
    ``num_episodes`` was won; a meta-episode that stopped early (after a win, under
    ``rollout.early_stop``) counts its last played episode, as ``summarize_trials`` does."""
    rows = trials[trials.suite == suite].sort_values([*META_EPISODE, "episode"])
    rows = rows[rows.episode <= num_episodes]
    last = rows.groupby(META_EPISODE, sort=True).tail(1)
    return last.set_index(META_EPISODE)[["task_seed", "success"]].astype({"success": float})


def paired_difference(run: pd.DataFrame, baseline: pd.DataFrame, suite: str, num_episodes: int,
                      names: tuple[str, str] = ("run", "baseline")) -> PairedDifference:
    """The paired final-success difference of two trial tables (module docstring).
    ValueError, naming both, when they did not play the same tasks: a meta-episode one
    lacks, or another task seed at the same place."""
    a, b = final_success(run, suite, num_episodes), final_success(baseline, suite, num_episodes)
    if not a.index.equals(b.index) or not (a.task_seed == b.task_seed).all():
        raise ValueError(f"{names[0]} and {names[1]} did not play the same {suite} tasks (meta-episodes or task seeds "
                         f"differ): they cannot be compared paired")
    diff = (a.success - b.success).tolist()
    mean, low, high = mean_interval(diff)
    return PairedDifference(float(a.success.mean()), float(b.success.mean()), mean, low, high, len(diff))
