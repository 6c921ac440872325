"""Stages record MLflow runs in a real sqlite store: params, per-step metrics,
artifacts and lineage tags; a flow's parent run nests them; an unreachable
server stops a stage before it does any work."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from mage_core.config import parse_config
from mage_core.stages.evaluate import evaluate
from mage_core.stages.train import train
from mage_core.tracking.mlflow_tracker import MlflowTracker, TrackingUnavailable
from mage_core.tracking.runs import PARENT_RUN_ID_ENV, RUN_ID_ENV

pytestmark = pytest.mark.integration

PARAMS = {
    "env": {"name": "kuhn_poker"},
    "train": {"iterations": 3, "groups_per_iteration": 2, "eval_every": 3, "checkpoint_every": 3},
    "algorithm": {"group_size": 2},
    "evaluation": {"meta_episodes_per_opponent_seat": 2},
    "tournament": {"matches": []},
    "tracking": {"mlflow": True, "experiment": "tests"},
}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"


def test_train_and_evaluate_are_child_runs_of_a_flow(store: str, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    parent = MlflowTracker.start(store, "tests", "flow")
    monkeypatch.setenv(PARENT_RUN_ID_ENV, parent.run_id)
    cfg = parse_config(PARAMS)
    train(cfg, tmp_path / "train")
    evaluate(cfg, tmp_path / "train" / "best", tmp_path / "eval", "in_domain", per_opponent_seat=2)
    parent.close()

    client = MlflowClient(store)
    children = client.search_runs([parent._client.get_run(parent.run_id).info.experiment_id],
                                  f"tags.mlflow.parentRunId = '{parent.run_id}'")
    by_name = {r.info.run_name: r for r in children}
    assert set(by_name) == {"train kuhn_poker mage seed0", "evaluate kuhn_poker mage seed0"}
    run = by_name["train kuhn_poker mage seed0"]
    assert run.info.status == "FINISHED"
    assert run.data.params["train.iterations"] == "3" and run.data.params["algorithm.preset"] == "mage"
    history = client.get_metric_history(run.info.run_id, "train/rollout/all/chips_ep3")
    assert [m.step for m in history] == [1, 2, 3]
    assert run.data.tags["dvc.stage"] == "train" and len(run.data.tags["git.commit"]) in (40, 7)
    assert {k: run.data.tags[k] for k in ("stage", "env", "method", "seed")} == {
        "stage": "train", "env": "kuhn_poker", "method": "mage", "seed": "0"}
    assert run.data.tags["mage.config_digest"] == run.data.params["config_digest"]
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"summary.json", "metrics.jsonl", "transcripts.txt"} <= artifacts
    evaluation = by_name["evaluate kuhn_poker mage seed0"]
    assert "eval/in_domain/all/chips_ep3" in evaluation.data.metrics
    assert {"trials.parquet", "metrics.json", "transcripts.txt"} <= {
        a.path for a in client.list_artifacts(evaluation.info.run_id)}


def test_a_flow_owned_run_is_logged_into_and_left_open(store: str, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    owned = MlflowTracker.start(store, "tests", "stage run made by a flow")
    monkeypatch.setenv(RUN_ID_ENV, owned.run_id)
    train(parse_config(PARAMS), tmp_path / "train")
    run = MlflowClient(store).get_run(owned.run_id)
    assert run.info.status == "RUNNING"  # the flow ends it
    assert "train/rollout/all/chips_ep1" in run.data.metrics
    owned.close()


def test_an_unreachable_server_fails_before_any_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # free once closed: nothing listens there
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{port}")
    with pytest.raises(TrackingUnavailable, match=f"127.0.0.1:{port}"):
        train(parse_config(PARAMS), tmp_path / "train")
    assert not (tmp_path / "train" / "policy-init").exists()
    assert not (tmp_path / "train" / "checkpoints").exists() or not any((tmp_path / "train" / "checkpoints").iterdir())
