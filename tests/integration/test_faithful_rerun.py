"""A faithful rerun changes nothing DVC hashes (issue 40): each kind of stage run twice on the
same params writes the same bytes into every output dvc.yaml declares for it, so a fresh
`make run` of committed code leaves dvc.lock as it was. (The sft stage's summary.json held
its wall-clock seconds: every rerun changed its hash and, through it, every dependent stage's
recorded input.) Wall-clock times go to the console and MLflow only."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
import yaml

from mage_core.config import parse_config
from mage_core.stages.evaluate import evaluate
from mage_core.stages.sft import sft
from mage_core.stages.train import train

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SMALL = {"tracking": {"mlflow": False}, "tournament": {"matches": []},
         "evaluation": {"meta_episodes_per_opponent_seat": 2},
         "train": {"groups_per_iteration": 2, "iterations": 2, "eval_every": 0, "checkpoint_every": 2},
         "algorithm": {"group_size": 2},
         "warm_start": {"meta_episodes": 8, "epochs": 1, "detour": 0.3}}


def digests(folder: Path, root: Path) -> dict[str, str]:
    """Every file under ``folder`` (a DVC output, file or folder), by path under ``root`` -> SHA-256."""
    files = [folder] if folder.is_file() else sorted(p for p in folder.rglob("*") if p.is_file())
    assert files, f"{folder}: no output"
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def declared_outs(kind: str, key: str) -> list[str]:
    """The outputs dvc.yaml declares for a stage of ``kind`` (``sft``, ``train``, ``evaluate``),
    with its foreach key put in: the test reads what DVC hashes, not a list of its own."""
    do = yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"][kind]["do"]
    outs = [next(iter(o)) if isinstance(o, dict) else o for o in do.get("outs", [])]
    return [o.replace("${key}", key) for o in outs]


def twice(root: Path, make) -> tuple[dict[str, str], dict[str, str]]:
    """``make(root)`` run twice in the same folder (an output may name its inputs' paths, the same
    in a rerun), the first run's files removed in between; the digests of each run's outputs."""
    first = make(root)
    shutil.rmtree(root)
    return first, make(root)


def test_sft_train_and_evaluate_write_the_same_bytes_twice(tmp_path: Path) -> None:
    sokoban = parse_config({**SMALL, "env": {"name": "sokoban"}, "rollout": {"restart": "same"}})

    def warm_start(root: Path) -> dict[str, str]:
        out = root / "artifacts" / "sft" / "sokoban"
        summary = sft(sokoban, out)
        assert summary["seconds"] >= 0  # the time is reported to the caller, never written
        assert declared_outs("sft", "sokoban") == ["${item.out}"]  # the stage's whole folder
        return digests(out, root)

    a, b = twice(tmp_path / "w", warm_start)
    assert a == b and "artifacts/sft/sokoban/summary.json" in a

    kuhn = parse_config({**SMALL, "env": {"name": "kuhn_poker"}})

    def trained(root: Path) -> dict[str, str]:
        train(kuhn, root / "artifacts" / "train" / "run")
        evaluate(kuhn, root / "artifacts" / "train" / "run" / "best", root / "artifacts" / "eval" / "run", "all",
                 per_opponent_seat=2)
        out = {}
        for kind in ("train", "evaluate"):
            for path in declared_outs(kind, "run"):
                out.update(digests(root / path, root))
        return out

    a, b = twice(tmp_path / "w", trained)
    assert a == b
    assert {"artifacts/train/run/best/model.safetensors", "artifacts/train/run/metrics.jsonl",
            "artifacts/train/run/summary.json", "artifacts/eval/run/metrics.json",
            "artifacts/eval/run/trials.parquet"} <= set(a)
