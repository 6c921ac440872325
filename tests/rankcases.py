"""Helpers of the tests that start `mage train` on several ranks (tests/integration/test_data_parallel.py,
tests/vllm/test_vllm_ranks.py)."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from mage_core.trainers.checkpoint import CheckpointManager

#: What an in-process DeepSpeed test leaves in this process's environment (its rank-0-of-1 group's
#: address and port): a `mage train` started from here must not inherit it.
LAUNCH_VARIABLES = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without a launcher's variables, on the CPU, one thread a rank."""
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARIABLES}
    return {**env, "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "", **extra}


def final_weights(out: Path) -> dict[str, torch.Tensor]:
    """The policy weights of a run's latest checkpoint."""
    from safetensors.torch import load_file

    latest = CheckpointManager(out / "checkpoints").latest()
    assert latest is not None
    return {k: v for k, v in load_file(str(latest / "model.safetensors")).items() if k.startswith("policy/")}


def assert_same_figures(mine: dict[str, float], theirs: dict[str, float], probabilities_abs: float = 1e-5) -> None:
    """Two runs' evaluation figures: the sampled ones equal (to 1e-9), the ones read from the
    model's own probabilities (``eval/first_hand/*``, ``opening_bet_*``) equal to rounding only,
    since two engines or backends give the same decisions from weights or logits that differ
    in their last bits."""
    import pytest

    assert mine.keys() == theirs.keys()
    read = {k for k in mine if k.startswith("eval/first_hand/") or "/opening_bet_" in k}
    assert {k: v for k, v in mine.items() if k not in read} == pytest.approx(
        {k: v for k, v in theirs.items() if k not in read}, abs=1e-9)
    assert {k: mine[k] for k in read} == pytest.approx({k: theirs[k] for k in read}, abs=probabilities_abs)
