"""A two-point grid end to end on local Ray: real Prefect (its test harness), real
DVC (one temp git repository per point), a real MLflow sqlite store and a real
local Ray instance. The two points' stages run at the same time in Ray workers;
the sweep is an MLflow parent run with one child per point and the stages below
them; a second run finds every stage done."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable, Iterator

import pandas as pd
import pytest
import yaml

pytestmark = pytest.mark.integration

GRID = {"vary": ["algorithm.preset=[mage,grpo]"], "name": "pair", "profile": "smoke",
        "overrides": ["env.name=kuhn_poker", "reproduce.eval_per_pair=1"], "max_concurrent": 2}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, copy_project: Callable[[Path], Path]) -> Path:
    return copy_project(tmp_path_factory.mktemp("sweep"))


@pytest.fixture(scope="module")
def local_ray(ray_slot: None) -> Iterator[None]:
    """Ray is started by the flow itself (a local instance); shut it down after this module."""
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    yield
    import ray

    ray.shutdown()


def test_two_points_run_concurrently_on_local_ray(project: Path, harness: None, local_ray: None,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from flows.sweep import sweep

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.chdir(project)
    result = sweep(str(project), ray=True, **GRID)
    stages = {r["label"]: r for r in result["stages"]}
    # each point's own stages and nothing else: a Kuhn run reads no task's data (dvc.runs.yaml); each
    # point's code stage writes the manifests its stages depend on
    assert set(stages) == {"mage/code", "mage/train@mage", "mage/evaluate@mage",
                           "grpo/code", "grpo/train@grpo", "grpo/evaluate@grpo"}
    assert not any(r["skipped"] for r in stages.values())

    # Concurrency: the two training stages overlapped in time, in two Ray worker processes.
    a, b = stages["mage/train@mage"], stages["grpo/train@grpo"]
    assert max(a["started"], b["started"]) < min(a["ended"], b["ended"]), (a, b)
    assert a["pid"] != b["pid"] and os.getpid() not in (a["pid"], b["pid"])
    import ray

    assert ray.is_initialized() and ray.cluster_resources().get("CPU") == 2.0

    # Each point is a DVC project of its own whose lock file records its two stages.
    sweep_dir = project / "artifacts" / "sweeps" / "pair-smoke"
    for point in ("mage", "grpo"):
        lock = yaml.safe_load((sweep_dir / point / "dvc.lock").read_text())["stages"]
        assert set(lock) == {"code", f"train@{point}", f"evaluate@{point}"}
        deps = {d["path"] for d in lock[f"train@{point}"]["deps"]}
        # its task's room and the manifest of the code its command can load (stages/code_deps.py), no data
        assert deps == {"mage_core/envs/kuhn_poker", "artifacts/code/train-kuhn_poker.md5"}
        manifest = (sweep_dir / point / "artifacts/code/train-kuhn_poker.md5").read_text()
        assert "  mage_core/stages/train.py\n" in manifest and "mage_core/stages/report.py" not in manifest
        params = yaml.safe_load((sweep_dir / point / "params.yaml").read_text())
        assert params["reproduce"]["runs"] == {point: {"env": "kuhn_poker", "method": point, "set": {}}}

    # The summary: one row per point, the figures read from each point's evaluation.
    report = sweep_dir / "report"
    table = pd.read_csv(report / "summary.csv")
    assert list(table.point) == ["mage", "grpo"] and list(table["algorithm.preset"]) == ["mage", "grpo"]
    for row in table.itertuples():
        metrics = json.loads((sweep_dir / row.point / "artifacts" / "eval" / row.point / "metrics.json")
                                 .read_text())["metrics"]
        assert row.final == pytest.approx(metrics["eval/in_domain/all/chips_ep3"])
        assert row.first == pytest.approx(metrics["eval/in_domain/all/chips_ep1"])
    assert (report / "bars.png").read_bytes().startswith(b"\x89PNG")
    summary = (report / "summary.md").read_text()
    assert "| mage | mage | Kuhn Poker | mage | chips |" in summary
    # Every suite of every point next to its exact ceilings (paper population, K=3, fresh deals).
    assert "## Kuhn Poker: every suite against its exact ceilings" in summary
    mage_row = next(line for line in summary.splitlines() if line.startswith("| mage | mage | in_domain | 3 |"))
    assert "| +0.125 | +0.236 | +0.238 | +0.275 |" in mage_row

    # MLflow: the sweep run, a child per point (its values as params), the stages below each point.
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{project / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("mage").experiment_id])
    parents = [r for r in runs if r.info.run_name == "sweep pair"]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert parents[0].data.params["sweep.vary.algorithm.preset"] == "['mage', 'grpo']"
    children = {r.info.run_name: r for r in runs if r.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id}
    assert set(children) == {"pair/mage", "pair/grpo"}
    for point, run in children.items():
        name = point.split("/")[1]
        assert run.data.params["algorithm.preset"] == name and run.info.status == "FINISHED"
        assert run.data.metrics["sweep/final"] == pytest.approx(float(table.set_index("point").at[name, "final"]))
        stage_runs = {r.data.tags["dvc.stage"]: r.info.run_name for r in runs
                      if r.data.tags.get("mlflow.parentRunId") == run.info.run_id}
        assert set(stage_runs) == {"code", f"train@{name}", f"evaluate@{name}"}
        assert stage_runs[f"train@{name}"] == f"train kuhn_poker {name} seed0 [{name}]"

    # A second run, in threads this time, finds every stage done.
    again = sweep(str(project), ray=False, **GRID)
    assert all(r["skipped"] for r in again["stages"])


def test_a_bad_point_stops_the_sweep_before_anything_is_written(project: Path) -> None:
    from mage_core.config import ConfigError
    from mage_core.stages.sweep import plan

    with pytest.raises(ConfigError) as caught:
        plan(project / "params.yaml", vary=["algorithm.preset=[mage,nope]", "train.learning_rate=[0.001,-1]"],
             name="bad", profile="smoke")
    problems = "\n".join(caught.value.problems)
    assert "unknown method preset 'nope'" in problems and "points nope-0_001, nope-m1" in problems
    assert "train.learning_rate: Input should be greater than 0 (got -1) (points mage-m1, nope-m1)" in problems
    assert not (project / "artifacts" / "sweeps" / "bad-smoke").exists()


def test_mage_sweep_ray_whose_local_instance_does_not_start_is_one_line(
        tmp_path: Path, copy_project: Callable[[Path], Path], mage_cmd: list[str], ray_slot: None) -> None:
    """Issue 39: a local Ray instance that timed out at start ended the sweep's flow in a raw
    traceback (the flow run's and Python's). Ray is now started before the flow runs (Ray's own
    setting makes its wait 0 s here): one line with the cause and what to try, exit 1."""
    import subprocess

    project = copy_project(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "MLFLOW_TRACKING_URI")}
    done = subprocess.run([*mage_cmd, "sweep", "--vary", "algorithm.preset=[mage,grpo]", "--name", "pair",
                           "--profile", "smoke", "--set", "env.name=kuhn_poker", "--max-concurrent", "2", "--ray"],
                          cwd=project, capture_output=True, text=True, timeout=300,
                          env={**env, "RAY_gcs_server_port_wait_time_s": "0", "RAY_USAGE_STATS_ENABLED": "0"})
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("Ray did not start")]
    assert "a local Ray instance did not start (Timed out waiting for file" in line
    assert line.endswith("or run the sweep without --ray")
