"""`mage train` and `mage evaluate` with ``backend.generator: vllm`` against the HF default.

Constrained Kuhn Poker: the policy scores the legal actions (``Generator.score``)
and the trainer draws its choice from those log-probabilities with its own seeded
generator, so two runs that agree on every score to ~1e-6 make the same decisions:
the same rewards, the same updates, the same evaluation. This checks the whole
path of the stages (vLLM built from the saved policy, a weight sync after every
update, evaluation sampling settings, the engine closed at the end) on real vLLM.
The model is the embedded tiny Qwen3 with head_dim 32 (vLLM's CPU attention).
"""

from __future__ import annotations

import pytest

vllm = pytest.importorskip("vllm", reason="needs the vLLM CPU test environment (make vllm-env; make test-vllm)")

import json  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

from mage_core.config import parse_config  # noqa: E402
from mage_core.stages.evaluate import evaluate  # noqa: E402
from mage_core.stages.train import train  # noqa: E402
from tests.rankcases import assert_same_figures  # noqa: E402

pytestmark = pytest.mark.vllm

PARAMS = {
    "env": {"name": "kuhn_poker"},
    "model": {"num_heads": 2, "num_kv_heads": 1, "head_dim": 32},
    "train": {"iterations": 3, "groups_per_iteration": 3, "eval_every": 0, "checkpoint_every": 1},
    "algorithm": {"group_size": 4},
    "evaluation": {"meta_episodes_per_opponent_seat": 4},
    "tournament": {"matches": []},
    "tracking": {"mlflow": False},
}


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def _rollout_metrics(out: Path) -> list[dict[str, float]]:
    """Each iteration's rollout figures (rewards, chips, invalid rate) from metrics.jsonl."""
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [picked for row in rows if (picked := {k: v for k, v in row.items() if k.startswith("train/rollout/")})]


def test_train_and_evaluate_on_vllm_equal_the_hf_default(tmp_path: Path, measured) -> None:
    hf_cfg = parse_config(PARAMS)
    vllm_cfg = parse_config({**PARAMS, "backend": {"generator": "vllm"}})
    hf_run = train(hf_cfg, tmp_path / "hf")
    vllm_run = train(vllm_cfg, tmp_path / "vllm")

    # Same decisions, so the same rewards and updates: the trained weights agree to rounding.
    a, b = _weights(tmp_path / "hf" / "best"), _weights(tmp_path / "vllm" / "best")
    start = _weights(tmp_path / "vllm" / "policy-init")
    diff = max(float((a[k] - b[k]).abs().max()) for k in a)
    moved = max(float((b[k] - start[k]).abs().max()) for k in start)
    measured("train stage: max |weights (vllm) - weights (hf)| after 3 iterations", diff)
    measured("train stage: max |weights - initial weights|", moved)
    assert diff < 1e-4
    assert moved > 1e-3  # the policy did move
    assert_same_figures(vllm_run["final_eval"], hf_run["final_eval"], probabilities_abs=1e-4)
    hf_rollouts, vllm_rollouts = _rollout_metrics(tmp_path / "hf"), _rollout_metrics(tmp_path / "vllm")
    assert len(hf_rollouts) == 3 and all(len(row) > 5 for row in hf_rollouts)
    assert vllm_rollouts == hf_rollouts  # the same decisions in every iteration's rollouts

    # The evaluation stage (temperature 0.7, top-p 0.8, top-k 20 over the scored actions).
    policy = tmp_path / "hf" / "best"
    hf_eval = evaluate(hf_cfg, policy, tmp_path / "eval-hf", which="in_domain", per_opponent_seat=6)
    vllm_eval = evaluate(vllm_cfg, policy, tmp_path / "eval-vllm", which="in_domain", per_opponent_seat=6)
    assert len(hf_eval) > 10
    assert_same_figures(vllm_eval, hf_eval, probabilities_abs=1e-4)
