"""The command line as a user runs it: subprocesses, exit codes, files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

HEAVY = ("numpy", "pydantic", "torch", "transformers", "pandas", "mlflow", "prefect", "great_expectations",
         "deepspeed", "ray", "alfworld", "textworld")


def run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("argv", [["--help"], ["tournament", "--help"], ["kuhn", "analyze", "--help"],
                                  ["ttt", "analyze", "--help"], ["webshop", "generate", "--help"],
                                  ["webshop", "check", "--help"], ["alfworld", "generate", "--help"],
                                  ["alfworld", "check", "--help"], ["data", "generate", "--help"],
                                  ["validate", "--help"], ["train", "--help"], ["evaluate", "--help"],
                                  ["reproduce", "--help"], ["report", "--help"], ["sweep", "--help"],
                                  ["ui", "--help"], ["doctor", "--help"]])
def test_help_imports_nothing_heavy(argv: list[str]) -> None:
    code = (
        "import sys\n"
        "from mage_core.cli import main\n"
        f"try:\n    main({argv!r})\nexcept SystemExit as e:\n    assert e.code == 0, e.code\n"
        f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "print('HEAVY=' + ','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == "HEAVY=", f"--help imported {out.stdout.splitlines()[-1]}"


def test_bad_params_exit_2_and_write_nothing(tmp_path: Path, mage_cmd: list[str]) -> None:
    (tmp_path / "params.yaml").write_text("env: {name: chess}\ntournament: {matches: [{game: go}]}\n")
    reports = tmp_path / "reports"
    reports.mkdir()
    previous = reports / "tournament.json"
    previous.write_text('{"kept": true}\n')
    out = run([*mage_cmd, "tournament"], tmp_path)
    assert out.returncode == 2
    assert "env.name: 'chess' is not one of tic_tac_toe, kuhn_poker, sokoban" in out.stderr
    assert "tournament.matches[0].game: 'go' is not one of tic_tac_toe, kuhn_poker" in out.stderr
    assert "tournament.matches[0].player_a: required key is missing" in out.stderr
    assert previous.read_text() == '{"kept": true}\n'
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["params.yaml", "reports", "tournament.json"]


def test_too_many_mines_for_the_board_is_one_line_before_any_work(
        project_root: Path, mage_cmd: list[str], tmp_path: Path) -> None:
    """Issue 39: 35 mines on a 6 x 6 board ended in a ValueError traceback while the
    tokenizer's corpus was played (the first reveal is safe, so no cell was left to play)."""
    out = run([*mage_cmd, "train", "--params", str(project_root / "params.yaml"), "--out", str(tmp_path / "out"),
               "--set", "env.name=minesweeper", "--set", "env.minesweeper.num_mines=35"], tmp_path)
    assert out.returncode == 2, out.stderr
    assert "env.minesweeper.num_mines: at most 34 on a 6 x 6 board" in out.stderr
    assert "Traceback" not in out.stderr and list(tmp_path.iterdir()) == []


def test_partial_adhoc_match_is_a_usage_error(project_root: Path, mage_cmd: list[str], tmp_path: Path) -> None:
    out = run([*mage_cmd, "tournament", "--params", str(project_root / "params.yaml"), "--game", "kuhn_poker",
               "--a", "cfr", "--out", str(tmp_path / "t.json")], tmp_path)
    assert out.returncode == 2
    assert "--game, --a and --b go together" in out.stderr
    assert not (tmp_path / "t.json").exists()


@pytest.mark.parametrize("where", ["under a file", "a folder"])
def test_a_tournament_output_that_cannot_be_written_stops_before_the_games(
        project_root: Path, mage_cmd: list[str], tmp_path: Path, where: str) -> None:
    # Issue 25: the games used to be played first and the write to fail with a traceback.
    (tmp_path / "a-file").write_text("kept\n")
    target = tmp_path / "a-file" / "t.json" if where == "under a file" else tmp_path
    out = run([*mage_cmd, "tournament", "--params", str(project_root / "params.yaml"), "--game", "tic_tac_toe",
               "--a", "minimax", "--b", "random", "--games", "20", "--out", str(target)], tmp_path)
    assert out.returncode == 2, out.stdout + out.stderr
    problem = "Not a directory: " + str(tmp_path / "a-file") if where == "under a file" else "is a folder"
    assert f"--out {target}: cannot write there (" in out.stderr and problem in out.stderr
    assert "Traceback" not in out.stderr and "minimax vs random" not in out.stdout  # no game was played
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"] and (tmp_path / "a-file").read_text() == "kept\n"


def test_adhoc_tournament_writes_json(project_root: Path, mage_cmd: list[str], tmp_path: Path) -> None:
    target = tmp_path / "out" / "t.json"
    out = run([*mage_cmd, "tournament", "--params", str(project_root / "params.yaml"), "--game", "tic_tac_toe",
               "--a", "minimax", "--b", "random", "--games", "20", "--out", str(target)], tmp_path)
    assert out.returncode == 0, out.stderr
    data = json.loads(target.read_text())
    summary = data["tournament/tic_tac_toe/minimax_vs_random"]
    assert summary["num_games"] == 20
    assert summary["loss_rate"] == 0.0  # perfect play never loses
    assert summary["win_rate"] + summary["draw_rate"] == pytest.approx(1.0)


@pytest.mark.parametrize("preset, expected", [(None, "AVX2"), ("default", "DEFAULT")])
def test_the_command_line_pins_cpu_kernels_unless_the_environment_chose(preset: str | None, expected: str) -> None:
    # The same CPU kernels on every x86 machine with AVX2 (what else a bit-identical run needs:
    # docs/learning.md): `mage` sets ATEN_CPU_CAPABILITY, MKL_CBWR and ONEDNN_MAX_CPU_ISA
    # before torch loads; a value already set wins.
    import os

    code = (
        "import os\n"
        "from mage_core.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "import torch\n"
        "print(os.environ['MKL_CBWR'], os.environ['ONEDNN_MAX_CPU_ISA'], torch.backends.cpu.get_cpu_capability())\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA")}
    if preset is not None:
        env["ATEN_CPU_CAPABILITY"] = preset
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1].split() == ["AVX2", "AVX2", expected]
