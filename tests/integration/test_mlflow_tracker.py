"""MlflowTracker against a real sqlite MLflow store in a temp folder (no mocks).

MLflow's first sqlite init (schema migrations) takes ~7 s, so one store is shared
by the whole module.
"""

from __future__ import annotations

import http.server
import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from mage_core.tracking.mlflow_tracker import (
    PARENT_RUN_TAG,
    MlflowTracker,
    TrackingUnavailable,
    check_tracking_uri,
    default_artifact_root,
    default_tracking_uri,
    run_tags,
)

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENT = "mage-test"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, Any]:
    """(tracking URI, store folder, MlflowClient) of a fresh sqlite store."""
    from mlflow.tracking import MlflowClient

    folder = tmp_path_factory.mktemp("mlflow-store")
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    return uri, folder, MlflowClient(tracking_uri=uri)


def test_default_uri_and_artifact_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert default_tracking_uri(tmp_path) == f"sqlite:///{tmp_path.resolve() / 'mlflow.db'}"
    assert default_artifact_root(tmp_path) == (tmp_path.resolve() / "mlartifacts").as_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow.example:5000")
    assert default_tracking_uri(tmp_path) == "http://mlflow.example:5000"


def test_parent_and_child_runs_round_trip(
    store: tuple[str, Path, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri, folder, client = store
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)

    parent = MlflowTracker.start(uri, EXPERIMENT, "reproduce", tags={"dvc.experiment": "exp-1"})
    train = MlflowTracker.start(uri, EXPERIMENT, "train", parent_run_id=parent.run_id, tags={"dvc.stage": "train"})
    evaluate = MlflowTracker.start(uri, EXPERIMENT, "evaluate", parent_run_id=parent.run_id)

    train.log_params({"train.learning_rate": 1e-4, "algorithm.preset": "mage", "env.k_episodes": 3})
    for step, loss in enumerate([1.5, 0.75, 0.25]):
        train.log_metrics(step, {"train/loss/policy": loss, "train/reward/mean": float("nan") if step == 1 else step})
    train.log_metrics(3, {"train/loss/policy": float("inf")})
    many = {f"sweep.p{i:03d}": i for i in range(150)}
    evaluate.log_params(many)
    evaluate.log_params({"long.value": "x" * 7000})
    evaluate.set_tags({"mage.config_digest": "abc123"})

    report = tmp_path / "tournament.json"
    report.write_text(json.dumps({"win_rate": 0.5}))
    evaluate.log_artifact(report, artifact_path="reports")
    outputs = tmp_path / "outs"
    (outputs / "sub").mkdir(parents=True)
    (outputs / "sub" / "a.txt").write_text("a")
    evaluate.log_artifacts(outputs, artifact_path="outs")
    for tracker in (train, evaluate, parent):
        tracker.close()
    parent.close()  # idempotent

    runs = {t.run_id: client.get_run(t.run_id) for t in (parent, train, evaluate)}
    assert PARENT_RUN_TAG not in runs[parent.run_id].data.tags
    for child in (train, evaluate):
        assert runs[child.run_id].data.tags[PARENT_RUN_TAG] == parent.run_id
        assert runs[child.run_id].info.status == "FINISHED"
    assert runs[train.run_id].info.run_name == "train"
    assert runs[train.run_id].data.tags["dvc.stage"] == "train"
    assert runs[train.run_id].data.params == {
        "train.learning_rate": "0.0001", "algorithm.preset": "mage", "env.k_episodes": "3"
    }

    history = client.get_metric_history(train.run_id, "train/loss/policy")
    assert sorted((m.step, m.value) for m in history) == [(0, 1.5), (1, 0.75), (2, 0.25)]  # inf skipped
    reward = client.get_metric_history(train.run_id, "train/reward/mean")
    assert sorted((m.step, m.value) for m in reward) == [(0, 0.0), (2, 2.0)]  # NaN skipped

    params = runs[evaluate.run_id].data.params
    assert {k: v for k, v in params.items() if k.startswith("sweep.")} == {k: str(v) for k, v in many.items()}
    assert len(params["long.value"]) == 6000 and params["long.value"].endswith("[truncated]")
    assert runs[evaluate.run_id].data.tags["mage.config_digest"] == "abc123"

    assert [f.path for f in client.list_artifacts(evaluate.run_id, "reports")] == ["reports/tournament.json"]
    assert [f.path for f in client.list_artifacts(evaluate.run_id, "outs/sub")] == ["outs/sub/a.txt"]
    experiment = client.get_experiment_by_name(EXPERIMENT)
    assert experiment.artifact_location == default_artifact_root(folder)
    # An explicit experiment artifact_location gets <location>/<run_id>/artifacts (no experiment id level).
    assert runs[evaluate.run_id].info.artifact_uri == f"{default_artifact_root(folder)}/{evaluate.run_id}/artifacts"
    stored = folder / "mlartifacts" / evaluate.run_id / "artifacts" / "reports" / "tournament.json"
    assert json.loads(stored.read_text()) == {"win_rate": 0.5}
    assert not (cwd / "mlruns").exists() and list(cwd.iterdir()) == []


def test_exception_inside_context_manager_fails_the_run(store: tuple[str, Path, Any]) -> None:
    uri, _, client = store
    with pytest.raises(ValueError, match="boom"):
        with MlflowTracker.start(uri, EXPERIMENT, "crashing-stage") as tracker:
            tracker.log_metrics(0, {"train/loss/policy": 1.0})
            raise ValueError("boom")
    assert client.get_run(tracker.run_id).info.status == "FAILED"
    with MlflowTracker.start(uri, EXPERIMENT, "fine-stage") as ok:
        pass
    assert client.get_run(ok.run_id).info.status == "FINISHED"


def test_system_metrics_stop_at_once_and_still_sample_a_short_run(store: tuple[str, Path, Any]) -> None:
    """A run shorter than the sampling interval gets its one final sample; closing the run
    does not wait for the next sample, and no sampler thread is left behind."""
    uri, _, client = store
    tracker = MlflowTracker.start(uri, EXPERIMENT, "short-stage")
    tracker.start_system_metrics(interval_s=30.0)
    assert [t.name for t in threading.enumerate()].count("SystemMetricsMonitor") == 1
    sum(i * i for i in range(200_000))  # some work
    started = time.monotonic()
    tracker.close()
    assert time.monotonic() - started < 5.0
    assert "SystemMetricsMonitor" not in [t.name for t in threading.enumerate()]
    run = client.get_run(tracker.run_id)
    assert run.info.status == "FINISHED"
    assert 0 < run.data.metrics["system/system_memory_usage_megabytes"]
    assert [m.step for m in client.get_metric_history(tracker.run_id, "system/cpu_utilization_percentage")] == [0]


def test_check_tracking_uri(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # free once closed: nobody listens there
    uri = f"http://127.0.0.1:{port}"
    started = time.monotonic()
    with pytest.raises(TrackingUnavailable) as info:
        check_tracking_uri(uri)
    assert time.monotonic() - started < 5.0
    assert uri in str(info.value) and "MLFLOW_TRACKING_URI" in str(info.value)

    check_tracking_uri(f"sqlite:///{tmp_path / 'new' / 'folder' / 'mlflow.db'}")
    assert (tmp_path / "new" / "folder").is_dir()
    check_tracking_uri("databricks")  # other schemes pass through


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (stdlib name)
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
        self.wfile.write(b"OK")

    def log_message(self, *args: Any) -> None:
        pass


def test_check_tracking_uri_against_a_live_http_server() -> None:
    """A real (stdlib) HTTP server: /health 200 passes; a prefix without /health is refused."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        uri = f"http://127.0.0.1:{server.server_address[1]}"
        check_tracking_uri(uri + "/")
        with pytest.raises(TrackingUnavailable, match="HTTP 404"):
            check_tracking_uri(uri + "/not-mlflow")
    finally:
        server.shutdown()
        server.server_close()


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def test_run_tags_from_git_and_dvc_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "test@example.com")
    _git(repo, "config", "user.name", "Test")
    _git(repo, "config", "commit.gpgsign", "false")
    (repo / "params.yaml").write_text("seed: 1\n")
    _git(repo, "add", "params.yaml")
    _git(repo, "commit", "-q", "-m", "init")
    monkeypatch.delenv("DVC_EXP_NAME", raising=False)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))  # "plain" below must not find a parent repo

    tags = run_tags(repo, "digest-1", None)
    assert tags == {"git.commit": _git(repo, "rev-parse", "HEAD"), "git.dirty": "false", "mage.config_digest": "digest-1"}
    (repo / "params.yaml").write_text("seed: 2\n")
    assert run_tags(repo, None, None)["git.dirty"] == "true"

    (repo / "dvc.lock").write_text(
        "schema: '2.0'\n"
        "stages:\n"
        "  train:\n"
        "    cmd: mage train --out artifacts/train\n"
        "    deps:\n"
        "    - path: params.yaml\n"
        "      md5: '0000'\n"
        "    outs:\n"
        "    - path: artifacts/train\n"
        "      hash: md5\n"
        "      md5: 1111.dir\n"
        "    - path: reports/train.json\n"
        "      hash: md5\n"
        "      md5: '2222'\n"
        "  evaluate:\n"
        "    cmd: mage evaluate\n"
        "    outs:\n"
        "    - path: reports/eval.json\n"
        "      md5: '3333'\n"
    )
    monkeypatch.setenv("DVC_EXP_NAME", "exp-lr")
    tags = run_tags(repo, "digest-1", "train")
    assert tags["dvc.stage"] == "train" and tags["dvc.experiment"] == "exp-lr"
    assert {k: v for k, v in tags.items() if k.startswith("dvc.out.")} == {
        "dvc.out.artifacts/train": "1111.dir",
        "dvc.out.reports/train.json": "2222",
    }
    assert {k: v for k, v in tags.items() if k.startswith("dvc.dep.")} == {"dvc.dep.params.yaml": "0000"}

    not_git = tmp_path / "plain"
    not_git.mkdir()
    assert run_tags(not_git, None, None)["git.commit"] == "unknown"


def test_importing_the_module_does_not_import_mlflow() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import mage_core.tracking.mlflow_tracker, sys; print('mlflow' in sys.modules)"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=True,
    )
    assert done.stdout.strip() == "False"
