"""What a stage asks Ray for: a multi-rank training stage its ranks' CPUs or GPUs.

A sweep point's stages run as Ray tasks (``mage sweep --ray``); a training stage with
``backend.ranks`` N launches N processes, so its task must hold N GPUs (or N x
``train.num_threads`` cores on a CPU) on one node, and a task no node can hold fails at
once instead of waiting forever. Checked on a real local Ray instance.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml

from flows.graph import StageJob, _on_ray, stage_resources
from mage_core.backends.ray_local import start_local_ray

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    shutil.copy2(ROOT / "params.yaml", tmp_path / "params.yaml")
    params = yaml.safe_load((tmp_path / "params.yaml").read_text())
    params["reproduce"]["runs"] = {
        "cpu2": {"env": "kuhn_poker", "method": "mage",
                 "set": {"backend.engine": "deepspeed", "backend.ranks": 2, "train.num_threads": 1}},
        "gpu8": {"env": "kuhn_poker", "method": "mage",
                 "set": {"backend.engine": "deepspeed", "backend.ranks": 8, "backend.gpus": 8}},
        "plain": {"env": "kuhn_poker", "method": "grpo"},
    }
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return tmp_path


def test_a_stage_asks_for_what_its_command_occupies(project: Path) -> None:
    assert stage_resources(project, "train@cpu2") == (2.0, 0.0)
    assert stage_resources(project, "train@gpu8") == (8.0, 8.0)  # one CPU to drive each GPU rank
    assert stage_resources(project, "evaluate@gpu8") == (1.0, 1.0)  # evaluation runs on one GPU
    assert stage_resources(project, "train@plain") == (1.0, 0.0)
    assert stage_resources(project, "evaluate@cpu2") == (1.0, 0.0)
    assert stage_resources(project, "data@webshop") == (1.0, 0.0)
    assert stage_resources(project, "report") == (1.0, 0.0)


def test_a_stage_no_ray_node_can_hold_fails_at_once(project: Path, ray_slot: None) -> None:
    import ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    started = not ray.is_initialized()
    if started:
        start_local_ray(2)
    try:
        job = StageJob(project, "train@gpu8", "p/train@gpu8", (), None, *stage_resources(project, "train@gpu8"))
        with pytest.raises(RuntimeError, match=r"p/train@gpu8 needs .*8 GPUs \(the cluster has 0\) on one Ray node"):
            _on_ray(job, None)
    finally:
        if started:
            ray.shutdown()
