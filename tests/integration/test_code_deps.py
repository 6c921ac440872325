"""Each kind of stage, run as dvc.yaml runs it, loads no project module its DVC dependencies miss
(issue 40; mage_core/stages/code_deps.py). The commands run in subprocesses under an import
trace (every ``mage_core`` module in ``sys.modules`` when the process exits), on a tiny params
file, with MLflow on (a sqlite store): a data stage (WebShop), a warm start (Sokoban), the train
and evaluate stages of a seeded single-agent task (MineSweeper) and of a two-player game with
exact analyses (Kuhn Poker), and the report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mage_core.stages.code_deps import stage_files

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
#: Runs the command line as `mage` does, then writes the project modules it loaded to $TRACE_OUT.
TRACED = (
    "import atexit, json, os, sys\n"
    "def dump():\n"
    "    files = sorted({m.__file__ for n, m in list(sys.modules.items())\n"
    "                    if n == 'mage_core' or n.startswith('mage_core.') and getattr(m, '__file__', None)})\n"
    "    json.dump(files, open(os.environ['TRACE_OUT'], 'w'))\n"
    "atexit.register(dump)\n"
    "from mage_core.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)
TINY = {
    "reproduce": {"iterations": 1, "eval_per_pair": 2,
                  "runs": {"minesweeper-mage": {"env": "minesweeper", "method": "mage"},
                           "kuhn_poker-mage": {"env": "kuhn_poker", "method": "mage"}}},
    "train": {"groups_per_iteration": 1, "eval_every": 0, "checkpoint_every": 1},
    "algorithm": {"group_size": 2},
    "evaluation": {"meta_episodes_per_opponent_seat": 1},
    "tournament": {"matches": []},
    "warm_start": {"tasks": {"sokoban": {"rollout.restart": "same"}}, "meta_episodes": 4, "epochs": 1},
    "data": {"webshop": {"seed": 0, "products_per_category": 4, "instructions_per_product": 1}},
    "env": {"webshop": {"num_eval": 4, "num_select": 2}},
}


def merged(base: dict, extra: dict) -> dict:
    out = dict(base)
    for key, value in extra.items():
        # runs and warm starts are replaced whole, the other sections merged key by key
        out[key] = merged(base.get(key) or {}, value) if isinstance(value, dict) and key not in ("runs", "tasks") else value
    return out


def traced(project: Path, args: list[str]) -> set[Path]:
    out = project / "trace.json"
    env = {**os.environ, "TRACE_OUT": str(out), "PYTHONPATH": str(ROOT),
           "MLFLOW_TRACKING_URI": f"sqlite:///{project / 'mlflow.db'}"}
    done = subprocess.run([sys.executable, "-c", TRACED, *args], cwd=project, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-3000:])
    return {Path(f).resolve() for f in json.loads(out.read_text())}


def declared(kind: str, game: str | None) -> set[Path]:
    """The files of a stage's code dependencies (folders expanded to their .py files)."""
    out: set[Path] = set()
    for path in stage_files(ROOT, kind, game):
        full = (ROOT / path).resolve()
        out.update(full.rglob("*.py") if full.is_dir() else [full])
    return out


def test_every_kind_of_stage_loads_only_its_declared_code(tmp_path: Path) -> None:
    base = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(merged(base, TINY)))
    checks = [
        ("data", "webshop", ["data", "generate", "webshop", "--out", "data/webshop"]),
        ("sft", "sokoban", ["sft", "--task", "sokoban", "--out", "artifacts/sft/sokoban"]),
    ]
    for run, game in (("minesweeper-mage", "minesweeper"), ("kuhn_poker-mage", "kuhn_poker")):
        checks += [("train", game, ["train", "--run", run, "--resume", "auto", "--out", f"artifacts/train/{run}"]),
                   ("evaluate", game, ["evaluate", "--run", run, "--policy", f"artifacts/train/{run}/best",
                                       "--out", f"artifacts/eval/{run}"])]
    checks.append(("report", None, ["report", "--eval-root", "artifacts/eval", "--train-root", "artifacts/train",
                                    "--out", "reports"]))
    for kind, game, args in checks:
        loaded = traced(tmp_path, args)
        missing = sorted(str(p.relative_to(ROOT)) for p in loaded - declared(kind, game))
        assert not missing, f"{kind} of {game}: loaded modules its DVC dependencies miss: {missing}"
        assert len(loaded) > 20, (kind, len(loaded))  # the trace saw the stage's own modules


def test_an_edit_elsewhere_is_no_dependency() -> None:
    # What the issue measures on a clone: the report's module is no train stage's dependency, and
    # MineSweeper's board is no other task's stage dependency (through any import path).
    board, report = (ROOT / "mage_core/envs/minesweeper/board.py").resolve(), (ROOT / "mage_core/stages/report.py").resolve()
    for game in ("kuhn_poker", "tic_tac_toe", "sokoban", "webshop", "alfworld"):
        for kind in ("train", "evaluate"):
            assert board not in declared(kind, game), (kind, game)
    assert board not in declared("report", None)  # the report reads the tasks' descriptors, runs no game
    assert board in declared("train", "minesweeper") and report in declared("report", None)
    for kind in ("train", "evaluate", "sft"):
        assert report not in declared(kind, "sokoban"), kind
