"""The prompting and memory baselines end to end on the embedded tiny model: the
train stage leaves the model as given (best/ = policy-init, 0 iterations), and
`mage evaluate` plays every suite with the baseline's memory."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from safetensors.torch import load_file

from mage_core.config import parse_config
from mage_core.stages.evaluate import evaluate
from mage_core.stages.train import train

pytestmark = pytest.mark.integration


def params(preset: str, game: str = "kuhn_poker") -> dict:
    return {"env": {"name": game}, "algorithm": {"preset": preset}, "tournament": {"matches": []},
            "tracking": {"mlflow": False}, "train": {"iterations": 3, "groups_per_iteration": 2},
            "evaluation": {"meta_episodes_per_opponent_seat": 2}}


@pytest.mark.parametrize("preset", ["react", "reflexion", "a_mem", "memento"])
def test_a_baseline_is_never_updated_and_evaluates_with_its_memory(preset: str, tmp_path: Path) -> None:
    cfg = parse_config(params(preset))
    summary = train(cfg, tmp_path / "train")
    assert summary["iterations"] == 0 and summary["best_iteration"] == 0
    init, best = (load_file(str(tmp_path / "train" / d / "model.safetensors")) for d in ("policy-init", "best"))
    assert init.keys() == best.keys() and all((init[k] == best[k]).all() for k in init)
    assert not (tmp_path / "train" / "checkpoints").exists() or not any((tmp_path / "train" / "checkpoints").iterdir())
    evaluate(cfg, tmp_path / "train" / "best", tmp_path / "eval", "in_domain", per_opponent_seat=2)
    trials = pd.read_parquet(tmp_path / "eval" / "trials.parquet")
    assert len(trials) == 6 * 2 * 3  # 3 archetypes x 2 seats, 2 meta-episodes each, K = 3 (ReAct: 3 attempts)
    transcript = (tmp_path / "train" / "transcripts.txt").read_text()
    # the memory baselines' compact prompts recall notes or cases ("mem ..."); the others never
    assert (" mem " in transcript) == (preset in ("a_mem", "memento"))
    assert json.loads((tmp_path / "train" / "summary.json").read_text())["method"] == preset


def test_memory_baselines_refuse_rollout_workers(tmp_path: Path) -> None:
    cfg = parse_config({**params("memento"), "rollout": {"workers": 1}})
    with pytest.raises(ValueError, match="rollout.workers: 0"):
        train(cfg, tmp_path / "train")
