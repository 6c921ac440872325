"""Data contracts on a real Great Expectations (1.x) ephemeral context."""

from __future__ import annotations

import pandas as pd
import pytest

from mage_core.evaluation.contracts import ContractError, trial_rules, validate
from mage_core.evaluation.trials import TRIAL_COLUMNS

pytestmark = pytest.mark.integration


def table(**changes: list) -> pd.DataFrame:
    rows = {
        "suite": ["in_domain"] * 4, "opponent": ["aggressive"] * 2 + ["conservative"] * 2,
        "seat": ["first", "first", "second", "second"], "meta_episode": [0, 0, 1, 1], "task_seed": [5, 5, 6, 6],
        "episode": [1, 2, 1, 2], "reward": [-5.0, 10.0, 5.0, -10.0], "score": [-1.0, 2.0, 1.0, -2.0],
        "success": [False, True, True, False], "draw": [False] * 4, "invalid": [0, 0, 1, 0], "turns": [2, 3, 2, 2],
        "tokens": [2, 3, 2, 2],
    }
    rows.update(changes)
    return pd.DataFrame(rows, columns=list(TRIAL_COLUMNS))


RULES = trial_rules(2, (-10.0, 10.0), ["aggressive", "conservative", "intermediate"], ["in_domain"])


def test_a_good_table_passes() -> None:
    validate(table(), "trials", RULES)


def test_every_broken_rule_is_reported_at_once() -> None:
    bad = table(episode=[1, 1, 1, 3],  # a duplicate trial (meta 0, episode 1) and an episode beyond K=2
                reward=[-5.0, 10.0, 25.0, -10.0],  # out of the game's bounds
                opponent=["aggressive", "aggressive", "bluffer", "conservative"])  # unknown opponent
    with pytest.raises(ContractError) as info:
        validate(bad, "trials", RULES)
    failures = info.value.failures
    assert len(failures) == 4, failures
    text = "\n".join(failures)
    assert "no duplicate trials" in text
    assert "episode indices lie in 1..2: 1 offending rows; e.g. [3]" in text
    assert "episode rewards lie within the game's bounds [-10, 10]: 1 offending rows; e.g. [25.0]" in text
    assert "opponents are known (aggressive, conservative, intermediate): 1 offending rows; e.g. ['bluffer']" in text
    assert str(info.value).startswith("trials failed 4 of ")


def test_missing_columns_and_nulls_fail() -> None:
    with pytest.raises(ContractError, match="columns are exactly"):
        validate(table().drop(columns=["tokens"]), "trials", RULES)
    with pytest.raises(ContractError, match="score has no missing values"):
        validate(table(score=[1.0, None, 1.0, 1.0]), "trials", RULES)
