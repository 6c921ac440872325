"""Issue 25, item 5: a tracking store that goes away never stops training, an interrupted run is
continued or marked, never left RUNNING. Real MLflow stores: sqlite in a temp folder, and an
HTTP URI where no server listens (a killed server)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from mage_core.tracking.mlflow_tracker import ENDED_TAG, PID_START_TAG, PID_TAG, MlflowTracker, store_client
from mage_core.tracking.outbox import Outbox

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('outage-store') / 'mlflow.db'}"


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # closed again when the block ends: nothing listens there


def test_metrics_params_and_tags_arrive_in_order_and_the_run_ends(store: str) -> None:
    lines: list[str] = []
    outbox = Outbox(MlflowTracker.start(store, "outbox", "in order"), warn=lines.append)
    outbox.log_params({"a": 1})
    for step in range(1, 6):
        outbox.log_metrics(step, {"loss": 1.0 / step, "skipped": float("nan")})
    outbox.set_tags({"phase": "done"})
    outbox.close()
    run = store_client(store).get_run(outbox.run_id)
    history = store_client(store).get_metric_history(outbox.run_id, "loss")
    assert [(m.step, m.value) for m in history] == [(s, 1.0 / s) for s in range(1, 6)]
    assert run.data.params == {"a": "1"} and run.data.tags["phase"] == "done"
    assert run.info.status == "FINISHED" and lines == []


def test_a_refused_item_is_dropped_with_one_line_and_the_rest_goes_on(store: str) -> None:
    lines: list[str] = []
    outbox = Outbox(MlflowTracker.start(store, "outbox", "refused"), warn=lines.append)
    outbox.log_params({"lr": 0.1})
    outbox.log_params({"lr": 0.2})  # MLflow params are write-once: the store refuses this one
    outbox.log_metrics(1, {"loss": 0.5})
    outbox.close()
    assert len(lines) == 1 and lines[0].startswith("MLflow refused log_params") and "dropped" in lines[0]
    run = store_client(store).get_run(outbox.run_id)
    assert run.data.params == {"lr": "0.1"} and run.data.metrics == {"loss": 0.5} and run.info.status == "FINISHED"


def test_an_unreachable_server_never_blocks_and_close_says_what_was_not_recorded(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A killed server: connections are refused. Every call returns at once; one line says the store is
    # away; the end waits flush_timeout_s, then one line says what was not recorded.
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    uri = f"http://127.0.0.1:{_closed_port()}"
    lines: list[str] = []
    outbox = Outbox(MlflowTracker(store_client(uri), "0" * 32), flush_timeout_s=1.5, warn=lines.append)
    started = time.monotonic()
    for step in range(1, 4):
        outbox.log_metrics(step, {"loss": 1.0})
    assert time.monotonic() - started < 0.5  # the caller never waits for the store
    time.sleep(1.0)
    outbox.close()
    assert time.monotonic() - started < 6
    assert len(lines) == 2, lines
    assert lines[0].startswith(f"MLflow at {uri} is unreachable (") and "training goes on" in lines[0]
    assert lines[1] == (f"MLflow at {uri} did not answer within 2 s (tracking.flush_timeout_s): 3 call(s) of run "
                        f"{'0' * 32} not recorded (the stage's metrics.jsonl has every metric); the run is left "
                        "RUNNING")
    assert outbox.unsent == 3


def test_artifacts_are_skipped_with_one_line_while_the_server_is_away(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    uri = f"http://127.0.0.1:{_closed_port()}"
    lines: list[str] = []
    outbox = Outbox(MlflowTracker(store_client(uri), "1" * 32), flush_timeout_s=0.5, warn=lines.append)
    (tmp_path / "summary.json").write_text("{}")
    outbox.log_metrics(1, {"loss": 1.0})
    outbox.log_artifact(tmp_path / "summary.json")
    assert f"MLflow at {uri} is unreachable: log_artifact {tmp_path / 'summary.json'} skipped" in lines
    outbox.close()


def test_a_registration_while_the_server_is_away_is_one_line_and_no_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    # Review of issue 25: `mage train`'s registration of best/ (and evaluate's comparison views) called the
    # store directly after the flush gave up: another wait, then a traceback. Now one line, at once.
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    uri = f"http://127.0.0.1:{_closed_port()}"
    lines: list[str] = []
    outbox = Outbox(MlflowTracker(store_client(uri), "2" * 32), flush_timeout_s=30, warn=lines.append)
    outbox.log_metrics(1, {"loss": 1.0})
    deadline = time.monotonic() + 10
    while not outbox.away and time.monotonic() < deadline:
        time.sleep(0.05)
    assert outbox.away
    started = time.monotonic()
    outbox.extra("registering best/", lambda: outbox.register_folder("best", "mage-kuhn_poker-mage", "best"))
    assert time.monotonic() - started < 1.0  # no 30 s drain: the store is known to be away
    assert lines[-1] == f"MLflow at {uri}: registering best/ skipped (MLflow at {uri} is unreachable " \
                        "(register_folder skipped))"
    outbox.flush_timeout_s = 0.5
    outbox.close()


def test_a_bad_item_is_dropped_and_does_not_block_the_queue(store: str) -> None:
    lines: list[str] = []
    outbox = Outbox(MlflowTracker.start(store, "outbox", "bad item"), warn=lines.append)
    outbox.log_metrics(1, {"loss": "not a number"})  # type: ignore[dict-item]  (float() raises: not the store's fault)
    outbox.log_metrics(2, {"loss": 0.5})
    outbox.close()
    assert len(lines) == 1 and lines[0].startswith("MLflow refused log_metrics") and "dropped" in lines[0]
    history = store_client(store).get_metric_history(outbox.run_id, "loss")
    assert [(m.step, m.value) for m in history] == [(2, 0.5)]


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    return int(done.stdout)


def test_a_run_whose_process_died_is_marked_killed_by_the_next_start(store: str) -> None:
    client = store_client(store)
    orphan = MlflowTracker.start(store, "orphans", "killed -9")
    client.set_tag(orphan.run_id, PID_TAG, str(_dead_pid()))  # as if its process had been killed -9
    client.delete_tag(orphan.run_id, PID_START_TAG)
    alive = MlflowTracker.start(store, "orphans", "still running")  # this process: alive
    assert client.get_run(orphan.run_id).info.status == "KILLED"
    assert "found RUNNING without its process" in client.get_run(orphan.run_id).data.tags[ENDED_TAG]
    assert client.get_run(alive.run_id).info.status == "RUNNING"
    # A reused pid (same number, another start time) is not the owner either.
    reused = MlflowTracker.start(store, "orphans", "pid reused")
    client.set_tag(reused.run_id, PID_START_TAG, "1")
    MlflowTracker.start(store, "orphans", "next").close()
    assert client.get_run(reused.run_id).info.status == "KILLED"
    alive.close()


def test_a_resumed_training_continues_its_interrupted_mlflow_run(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from mage_core.config import parse_config
    from mage_core.stages.train import train

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)
    params: dict[str, Any] = {
        "env": {"name": "kuhn_poker"}, "tournament": {"matches": []}, "algorithm": {"group_size": 4},
        "train": {"iterations": 4, "groups_per_iteration": 2, "eval_every": 0, "checkpoint_every": 1},
        "evaluation": {"meta_episodes_per_opponent_seat": 2},
        "tracking": {"mlflow": True, "experiment": "resume", "system_metrics": False, "register_models": False}}
    out = tmp_path / "it's a run"  # a quote: MLflow's filters would not find it by this tag
    train(parse_config(params), out, stop_after=2)  # interrupted: its run ends KILLED
    train(parse_config(params), out, resume=True)
    client = store_client(uri)
    experiment = client.get_experiment_by_name("resume").experiment_id
    runs = client.search_runs([experiment])
    assert len(runs) == 1  # not a second run for the resumed half
    run = runs[0]
    assert run.info.status == "FINISHED" and run.data.tags["mage.resumed_from_step"] == "2"
    steps = [m.step for m in client.get_metric_history(run.info.run_id, "train/ppo/loss")]
    assert steps == [1, 2, 3, 4]


@pytest.mark.slow
def test_mage_train_outlives_its_mlflow_server_and_records_every_metric_in_one_run(tmp_path: Path) -> None:
    """The issue's case: the MLflow server (`mage ui`'s) is stopped during `mage train` and started
    again a few seconds later. Training never waits; every metric ends up in the one run, FINISHED."""
    import json
    import os
    import shutil
    import signal

    from tests.integration.test_ui import _free_port, _search_runs, _start_ui

    shutil.copy2(Path(__file__).resolve().parents[2] / "params.yaml", tmp_path / "params.yaml")
    MlflowTracker.start(f"sqlite:///{tmp_path / 'mlflow.db'}", "mage", "store made").close()
    port = _free_port()
    ui = _start_ui(tmp_path, port, tmp_path / "ui-1.log")
    _search_runs(ui, port)
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"http://127.0.0.1:{port}", "HF_HUB_OFFLINE": "1"}
    iterations = 40
    train = subprocess.Popen(
        [sys.executable, "-m", "mage_core", "train", "--out", "run", "--iterations", str(iterations),
         "--set", "train.groups_per_iteration=4", "--set", "train.eval_every=0", "--set", "tracking.experiment=outage",
         "--set", "tracking.system_metrics=false",
         "--set", "evaluation.meta_episodes_per_opponent_seat=2"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    restarted = None
    try:
        metrics = tmp_path / "run" / "metrics.jsonl"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and (not metrics.exists() or len(metrics.read_text().splitlines()) < 4):
            time.sleep(0.2)
        os.kill(ui.pid, signal.SIGTERM)  # the server goes away mid-training
        assert ui.wait(timeout=60) == 0
        time.sleep(3)
        restarted = _start_ui(tmp_path, port, tmp_path / "ui-2.log")
        _search_runs(restarted, port)
        _, stderr = train.communicate(timeout=300)
        assert train.returncode == 0, stderr[-3000:]
        assert "is unreachable" in stderr and "answers again" in stderr, stderr[-3000:]
        assert "Traceback" not in stderr
        found = _search_runs(restarted, port)
    finally:
        for process in (train, ui, restarted):
            if process is not None and process.poll() is None:
                process.kill()
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("outage").experiment_id
    runs = client.search_runs([experiment])
    assert len(runs) == 1 and runs[0].info.status == "FINISHED", found
    steps = [m.step for m in client.get_metric_history(runs[0].info.run_id, "train/ppo/loss")]
    assert steps == list(range(1, iterations + 1))
    logged = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()][1:]
    assert [m.value for m in client.get_metric_history(runs[0].info.run_id, "train/ppo/loss")] == pytest.approx(
        [row["train/ppo/loss"] for row in logged if "train/ppo/loss" in row])
