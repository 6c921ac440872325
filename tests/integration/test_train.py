"""`mage train` end to end on the embedded tiny model: resume is exact.

An interrupted-and-resumed run (in-process stop, and a real SIGKILL of the
CLI) must end with bit-identical parameters to an uninterrupted run with the
same seed; a corrupt checkpoint must stop the resume with a clear error.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from safetensors.torch import load_file

from mage_core.config import parse_config
from mage_core.stages.train import train
from mage_core.trainers.checkpoint import CheckpointError, CheckpointManager

pytestmark = pytest.mark.integration

PARAMS = {
    "env": {"name": "kuhn_poker"},
    "train": {"iterations": 4, "groups_per_iteration": 3, "eval_every": 2, "checkpoint_every": 1},
    "algorithm": {"group_size": 4},
    "evaluation": {"meta_episodes_per_opponent_seat": 4},
    "tournament": {"matches": []},
}


def final_weights(out: Path) -> dict:
    latest = CheckpointManager(out / "checkpoints").latest()
    assert latest is not None
    return load_file(str(latest / "model.safetensors"))


def assert_same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert (a[key] == b[key]).all(), key


def test_resume_in_process_is_bit_identical(tmp_path: Path) -> None:
    cfg = parse_config(PARAMS)
    straight = train(cfg, tmp_path / "straight")
    first = train(cfg, tmp_path / "split", stop_after=2)
    assert first["interrupted"] and first["iteration"] == 2
    resumed = train(cfg, tmp_path / "split", resume=True)
    assert resumed["iterations"] == straight["iterations"] == 4
    assert_same(final_weights(tmp_path / "straight"), final_weights(tmp_path / "split"))
    assert resumed["final_eval"] == straight["final_eval"]
    # The resumed log reads like the uninterrupted one.
    log_a = (tmp_path / "straight" / "metrics.jsonl").read_text().splitlines()
    log_b = (tmp_path / "split" / "metrics.jsonl").read_text().splitlines()
    assert len(log_a) == len(log_b)


def test_sigkill_then_resume_matches(tmp_path: Path, project_root: Path) -> None:
    params = tmp_path / "params.yaml"
    slow = {**PARAMS, "train": {**PARAMS["train"], "iterations": 6}}
    params.write_text(yaml.safe_dump(slow))
    cmd = [sys.executable, "-m", "mage_core", "train", "--params", str(params)]
    env = {**os.environ, "COLUMNS": "120"}
    subprocess.run([*cmd, "--out", str(tmp_path / "straight")], check=True, capture_output=True, env=env,
                   timeout=600)
    proc = subprocess.Popen([*cmd, "--out", str(tmp_path / "killed")], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env)
    manager = CheckpointManager(tmp_path / "killed" / "checkpoints")
    deadline = time.monotonic() + 300
    while manager.latest() is None or manager.latest().name < "step-000002":
        assert proc.poll() is None, "training ended before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    out = subprocess.run([*cmd, "--out", str(tmp_path / "killed"), "--resume"], capture_output=True, text=True,
                         env=env, timeout=600)
    assert out.returncode == 0, out.stderr
    assert "resumed from" in out.stdout
    assert_same(final_weights(tmp_path / "straight"), final_weights(tmp_path / "killed"))


def test_corrupt_checkpoint_is_reported_and_kept(tmp_path: Path) -> None:
    cfg = parse_config(PARAMS)
    train(cfg, tmp_path / "run", stop_after=2)
    latest = CheckpointManager(tmp_path / "run" / "checkpoints").latest()
    weights = latest / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="model.safetensors"):
        train(cfg, tmp_path / "run", resume=True)
    assert weights.read_bytes() == data[: len(data) // 2]  # nothing was overwritten
    # Without --resume an existing run is never silently overwritten.
    with pytest.raises(Exception, match="--resume"):
        train(cfg, tmp_path / "run")


def test_changed_config_refuses_to_resume(tmp_path: Path) -> None:
    train(parse_config(PARAMS), tmp_path / "run", stop_after=1)
    changed = parse_config({**PARAMS, "train": {**PARAMS["train"], "learning_rate": 0.5}})
    with pytest.raises(CheckpointError, match="config_digest"):
        train(changed, tmp_path / "run", resume=True)
