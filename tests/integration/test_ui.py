"""`mage ui`: the MLflow UI on the project's embedded store, on 127.0.0.1."""

from __future__ import annotations

import json
import os
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


def test_ui_serves_the_projects_runs(tmp_path: Path) -> None:
    from mage_core.tracking.mlflow_tracker import MlflowTracker

    (tmp_path / "params.yaml").write_text("seed: 0\n")
    run = MlflowTracker.start(f"sqlite:///{tmp_path / 'mlflow.db'}", "mage", "a stage")
    run.close()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    ui = subprocess.Popen([sys.executable, "-m", "mage_core", "ui", "--port", str(port)], cwd=tmp_path, env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}/api/2.0/mlflow/runs/search"
        body = json.dumps({"experiment_ids": ["1"]}).encode()
        deadline, found = time.monotonic() + 90, None
        while time.monotonic() < deadline and found is None:
            try:
                request = urllib.request.Request(url, body, {"Content-Type": "application/json"})
                with urllib.request.urlopen(request, timeout=2) as response:
                    found = json.loads(response.read())
            except OSError:
                assert ui.poll() is None, "mage ui exited"
                time.sleep(0.5)
        assert found is not None, "the UI never answered"
        assert [r["info"]["run_id"] for r in found["runs"]] == [run.run_id]
    finally:
        os.killpg(ui.pid, 15)
        ui.wait(timeout=30)
