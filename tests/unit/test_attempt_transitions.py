"""benchmarks/attempt_transitions.py: win rates by the previous attempt's outcome, on a trial
table written by hand."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd
import pytest

pytestmark = pytest.mark.unit

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "attempt_transitions.py"


def _module():
    spec = importlib.util.spec_from_file_location("attempt_transitions", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_shares_by_the_previous_outcome(tmp_path: Path) -> None:
    # Five meta-episodes, attempts 1-3 (1 = won): W W W, W L L, L W W, L L W, L L L.
    outcomes = [(1, 1, 1), (1, 0, 0), (0, 1, 1), (0, 0, 1), (0, 0, 0)]
    rows = [{"suite": "in_domain", "meta_episode": m, "episode": k + 1, "success": bool(won)}
            for m, attempts in enumerate(outcomes) for k, won in enumerate(attempts)]
    rows.append({"suite": "ood", "meta_episode": 0, "episode": 1, "success": True})  # another suite: ignored
    pd.DataFrame(rows).to_parquet(tmp_path / "trials.parquet")
    # Attempt 1 won in 2 (then 1 of 2 won attempt 2), lost in 3 (then 1 of 3 won attempt 2);
    # attempt 2 won in 2 (both won attempt 3), lost in 3 (1 of 3 won attempt 3).
    assert _module().transitions(tmp_path) == [(1, 0.5, 2, 1 / 3, 3), (2, 1.0, 2, 1 / 3, 3)]


def test_a_folder_without_trials_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="trials.parquet: no trial table"):
        _module().transitions(tmp_path)
