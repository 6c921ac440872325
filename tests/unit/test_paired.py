"""The paired final-success difference of two runs on the same tasks (issue 39), on trial
tables written by hand, with the figures computed by hand."""

from __future__ import annotations

import pandas as pd
import pytest

from mage_core.evaluation.paired import paired_difference

pytestmark = pytest.mark.unit


def trials(finals: list[list[bool]], seeds: list[int] | None = None) -> pd.DataFrame:
    """A single-agent suite: meta-episode i played episodes 1..len(finals[i]) with those successes."""
    rows = []
    for i, episodes in enumerate(finals):
        for k, won in enumerate(episodes, start=1):
            rows.append({"suite": "in_domain", "opponent": "none", "seat": "none", "meta_episode": i,
                         "task_seed": (seeds or [100 + j for j in range(len(finals))])[i], "episode": k,
                         "success": won})
    return pd.DataFrame(rows)


def test_the_mean_paired_difference_and_its_normal_interval() -> None:
    run = trials([[False, False, True], [False, False, False], [True, True, True], [False, True, True]])
    base = trials([[False, False, False], [False, False, False], [True, True, True], [False, False, False]])
    d = paired_difference(run, base, "in_domain", 3)
    # finals: run 1, 0, 1, 1 (0.75); baseline 0, 0, 1, 0 (0.25); differences 1, 0, 0, 1: mean 0.5,
    # sample sd sqrt(4 x 0.25 / 3) = 0.5774, half-width 1.959964 x 0.5774 / 2 = 0.5658.
    assert (d.run_final, d.baseline_final, d.n) == (0.75, 0.25, 4)
    assert d.mean == 0.5
    assert d.low == pytest.approx(0.5 - 0.565793, abs=1e-6) and d.high == pytest.approx(0.5 + 0.565793, abs=1e-6)
    assert d.verdict == "not resolved"


def test_an_early_stop_counts_its_last_played_episode() -> None:
    # Meta-episode 0 stopped after a win in episode 1 (rollout.early_stop): its final is that win.
    run = trials([[True], [False, False, True]])
    base = trials([[False, False, False], [False, False, False]])
    d = paired_difference(run, base, "in_domain", 3)
    assert (d.run_final, d.mean, d.low, d.high, d.verdict) == (1.0, 1.0, 1.0, 1.0, "above")


def test_runs_that_played_other_tasks_are_refused_by_name() -> None:
    run = trials([[True], [False]], seeds=[1, 2])
    with pytest.raises(ValueError, match="a-run and b-run did not play the same in_domain tasks"):
        paired_difference(run, trials([[True], [False]], seeds=[1, 3]), "in_domain", 1, ("a-run", "b-run"))
    with pytest.raises(ValueError, match="did not play the same"):
        paired_difference(run, trials([[True]], seeds=[1]), "in_domain", 1)
