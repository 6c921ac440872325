"""A training stage killed after its first checkpoints and re-run by `mage reproduce`
ends with exactly the outputs of an uninterrupted run (issue 25, item 2): DVC deletes a
stage's outs before it re-runs it unless they persist, and the resumed run needs its
log and best/ (real Prefect, real DVC in a temp git repository, real processes)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pytest
import yaml

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RUN = "kuhn_poker-mage"
ITERATIONS = 30


def test_a_training_stage_killed_after_a_checkpoint_reruns_to_the_uninterrupted_outputs(
        tmp_path: Path, harness: None, copy_project: Callable[[Path], Path], monkeypatch: pytest.MonkeyPatch) -> None:
    import psutil

    from flows.reproduce import reproduce
    from mage_core.cli import main
    from mage_core.stages.reproduce import prepare_workspace

    workspace = prepare_workspace(copy_project(tmp_path), "smoke")
    params = yaml.safe_load((workspace / "params.yaml").read_text())
    params["reproduce"]["runs"] = {RUN: {"env": "kuhn_poker", "method": "mage"}}
    params["reproduce"]["iterations"] = ITERATIONS
    # several checkpoints, and best/ chosen among several evaluations
    params["train"].update({"checkpoint_every": 2, "eval_every": 2, "keep_checkpoints": 2})
    (workspace / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(workspace)

    out = workspace / "artifacts" / "train" / RUN
    env = {**os.environ, "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DVC_NO_ANALYTICS": "1"}
    with (tmp_path / "killed.log").open("w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "flows", "reproduce", str(workspace)], cwd=workspace,
                                env=env, start_new_session=True, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None and not (out / "checkpoints" / "step-000004").exists():
            time.sleep(0.1)
        assert proc.poll() is None, f"the flow ended before it was killed:\n{(tmp_path / 'killed.log').read_text()}"
        assert (out / "checkpoints" / "step-000004").exists(), "no second checkpoint within 300 s"
        tree = psutil.Process(proc.pid).children(recursive=True)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        _, alive = psutil.wait_procs(tree, timeout=60)
        assert not alive, f"killed processes still present: {alive}"
    assert not (out / "summary.json").exists()  # killed mid-training

    rerun = {r["stage"]: r["skipped"] for r in reproduce(str(workspace))}
    assert rerun[f"train@{RUN}"] is False
    assert not (out / "superseded").exists()  # resumed, not started over

    reference = tmp_path / "uninterrupted"
    assert main(["train", "--run", RUN, "--out", str(reference)]) == 0  # the same params line: same tracking
    for name in ("metrics.jsonl", "summary.json", "best/model.safetensors", "best/mage-policy.json"):
        assert (out / name).read_bytes() == (reference / name).read_bytes(), name
    lines = (out / "metrics.jsonl").read_text().splitlines()
    assert lines[0].startswith('{"params"') and len(lines) > ITERATIONS
