"""The same grid two ways (issue 42): the smoke profile's `smoke_ablation` grid run by the
reproduction's flow (its points as runs of the one graph, the seed-0 MAGE point being the
profile's kuhn_poker-mage) and by `mage sweep` (every point in its own workspace). Real Prefect
(its test harness), real DVC, real MLflow: the checkpoints and the trial tables of every point
must be the same bytes."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Callable

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # ~5 min on 2 cores (docs/testing.md)

#: sweep point -> the reproduction's run that trained it
POINTS = {"mage-0": "kuhn_poker-mage", "mage-1": "smoke_ablation-mage-1",
          "ablation_cumulative-0": "smoke_ablation-ablation_cumulative-0",
          "ablation_cumulative-1": "smoke_ablation-ablation_cumulative-1"}


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def test_the_flow_and_mage_sweep_train_and_evaluate_every_point_alike(
        tmp_path: Path, harness: None, copy_project: Callable[[Path], Path], monkeypatch: pytest.MonkeyPatch) -> None:
    from flows.reproduce import reproduce
    from flows.sweep import sweep
    from mage_core.stages.reproduce import prepare_workspace

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    project = copy_project(tmp_path)
    workspace = prepare_workspace(project, "smoke")
    monkeypatch.chdir(workspace)
    ran = {r["stage"] for r in reproduce(str(workspace))}
    assert {f"train@{run}" for run in POINTS.values()} | {"ablations"} <= ran
    monkeypatch.chdir(project)
    result = sweep(str(project), grid="smoke_ablation", profile="smoke", max_concurrent=2)
    assert {r["label"].split("/")[0] for r in result["stages"]} == set(POINTS)
    swept = project / "artifacts" / "sweeps" / "smoke_ablation-smoke"  # a sweep's workspaces, with a profile
    for point, run in POINTS.items():
        mine = swept / point / "artifacts"
        theirs = workspace / "artifacts"
        assert _md5(mine / "train" / point / "best" / "model.safetensors") == \
            _md5(theirs / "train" / run / "best" / "model.safetensors"), point
        assert _md5(mine / "eval" / point / "trials.parquet") == _md5(theirs / "eval" / run / "trials.parquet"), point
