"""`mage ui`: the MLflow UI on the project's embedded store, on 127.0.0.1; it points
at the experiment's training runs, and stopping it stops its MLflow server too."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def test_ui_without_a_store_says_how_to_make_one(tmp_path: Path) -> None:
    (tmp_path / "params.yaml").write_text("seed: 0\n")
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    done = subprocess.run([sys.executable, "-m", "mage_core", "ui"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert "no runs recorded yet" in done.stderr and "mage reproduce --profile smoke" in done.stderr


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _start_ui(project: Path, port: int, log: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    with log.open("w") as out:
        return subprocess.Popen([sys.executable, "-m", "mage_core", "ui", "--port", str(port)], cwd=project, env=env,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _kill_all(ui: subprocess.Popen, children: list) -> None:
    import psutil

    for child in children:
        try:
            child.kill()
        except psutil.NoSuchProcess:
            pass
    if ui.poll() is None:
        ui.kill()
        ui.wait(timeout=30)


def _search_runs(ui: subprocess.Popen, port: int) -> dict:
    """The store's runs of experiment 1 as the UI's REST API lists them, once it answers."""
    url = f"http://127.0.0.1:{port}/api/2.0/mlflow/runs/search"
    body = json.dumps({"experiment_ids": ["1"]}).encode()
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            request = urllib.request.Request(url, body, {"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=2) as response:
                return json.loads(response.read())
        except OSError:
            assert ui.poll() is None, "mage ui exited"
            time.sleep(0.5)
    raise AssertionError("the UI never answered")


def test_ui_serves_the_projects_runs_and_links_their_training_runs(tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    from mage_core.tracking.mlflow_tracker import MlflowTracker

    (tmp_path / "params.yaml").write_text("seed: 0\n")
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    run = MlflowTracker.start(store, "mage", "a stage")
    run.close()
    # MLflow 3's experiment-kind tag: an experiment of training runs, not of GenAI traces.
    assert MlflowClient(store).get_experiment("1").tags["mlflow.experimentKind"] == "custom_model_development"
    from mage_core.tracking.views import ensure_table1_views

    ensure_table1_views(MlflowClient(store), "1", ["webshop"], {"webshop": "WebShop"})  # as `mage evaluate` does
    port = _free_port()
    ui = _start_ui(tmp_path, port, tmp_path / "ui.log")
    try:
        found = _search_runs(ui, port)
        assert [r["info"]["run_id"] for r in found["runs"]] == [run.run_id]
        # The link opens the runs of experiment 1 in the UI's "Machine learning" mode.
        link = f"http://127.0.0.1:{port}/#/experiments/1/runs?workflowType=machine_learning"
        log = (tmp_path / "ui.log").read_text()
        assert link in log
        # ... and the saved views, as the UI reads them: experiment tags it serves.
        assert (f"Table 1: WebShop by method: http://127.0.0.1:{port}/#/experiments/1/runs?"
                "viewStateShareKey=mage-table1-webshop&workflowType=machine_learning") in log
        url = f"http://127.0.0.1:{port}/api/2.0/mlflow/experiments/get?experiment_id=1"
        with urllib.request.urlopen(url, timeout=10) as response:
            tags = {t["key"]: t["value"] for t in json.loads(response.read())["experiment"]["tags"]}
        view = json.loads(tags["mlflow.sharedViewState.mage-table1-webshop"])
        assert view["name"] == "Table 1: WebShop by method" and isinstance(view["createdAt"], int)
        assert "tags.env = 'webshop'" in json.loads(view["state"])["searchFilter"]
    finally:
        os.killpg(ui.pid, 15)
        ui.wait(timeout=30)


def test_an_existing_experiment_without_a_kind_gets_one_and_a_kind_set_by_hand_stays(tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    from mage_core.tracking.mlflow_tracker import MlflowTracker

    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(store)
    old = client.create_experiment("old")  # as a store made before the tag
    mine = client.create_experiment("mine", tags={"mlflow.experimentKind": "genai_development"})
    MlflowTracker.start(store, "old", "a stage").close()
    MlflowTracker.start(store, "mine", "a stage").close()
    assert client.get_experiment(old).tags["mlflow.experimentKind"] == "custom_model_development"
    assert client.get_experiment(mine).tags["mlflow.experimentKind"] == "genai_development"


#: Seconds after the signal by which every process of the server has exited and its port is free:
#: measured 1.0-1.5 s after SIGKILL and 1.7-2.2 s after SIGTERM or SIGINT on this 2-core machine under a
#: load of 2.3-2.9 (uvicorn goes in 0.1-0.3 s; `mlflow ui`, which forwards the signal to it, then takes
#: ~0.9 s to exit, and the lifeline group's leader follows it); a margin for a busier machine. (It was
#: 60 s, counting the group leader's zombie as running until PID 1 collects it, which psutil does.)
STOPPED_WITHIN_S = 10.0


def _exited(processes: list, timeout_s: float) -> list:
    """Those of ``processes`` still running after ``timeout_s``; a zombie has exited (it holds no port and
    no memory: it waits for PID 1, its parent once mage ui is gone, to collect its exit status)."""
    import psutil

    deadline = time.monotonic() + timeout_s
    while True:
        left = []
        for process in processes:
            try:
                if process.status() != psutil.STATUS_ZOMBIE:
                    left.append(process)
            except psutil.NoSuchProcess:
                pass
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL], ids=["SIGTERM", "SIGINT", "SIGKILL"])
def test_stopping_mage_ui_stops_its_mlflow_server(tmp_path: Path, stop: signal.Signals) -> None:
    # SIGKILL (issue 25): mage ui runs no clean-up at all, yet its server's process group dies with it
    # (mage_core/io/lifeline.py --group) and the port is free; within seconds (issue 39).
    import psutil

    from mage_core.tracking.mlflow_tracker import MlflowTracker

    (tmp_path / "params.yaml").write_text("seed: 0\n")
    MlflowTracker.start(f"sqlite:///{tmp_path / 'mlflow.db'}", "mage", "a stage").close()
    port = _free_port()
    ui = _start_ui(tmp_path, port, tmp_path / "ui.log")
    children: list = []
    try:
        _search_runs(ui, port)  # serving: the server processes exist
        children = psutil.Process(ui.pid).children(recursive=True)
        assert children, "mage ui runs its MLflow server as child processes"
        os.kill(ui.pid, stop)  # mage ui alone, as a service manager or `kill` would
        signalled = time.monotonic()
        assert ui.wait(timeout=STOPPED_WITHIN_S) == (-signal.SIGKILL if stop == signal.SIGKILL else 0)
        alive = _exited(children, STOPPED_WITHIN_S - (time.monotonic() - signalled))
        assert not alive, f"still running {STOPPED_WITHIN_S} s after {stop.name}: {alive}"
        print(f"{stop.name}: the server's processes exited {time.monotonic() - signalled:.1f} s after the signal")
        with pytest.raises(OSError):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
        with socket.socket() as probe:  # the port is free again: no socket listens there
            # SO_REUSEADDR: a closed connection's TIME_WAIT may remain; a listener would still refuse the bind
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(("127.0.0.1", port))
    finally:
        _kill_all(ui, children)  # nothing of a failed run outlives the test
