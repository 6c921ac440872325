"""One command writes an output folder at a time (issue 39): a second `mage train`, `mage
evaluate` or `mage sft` on the `--out` another one is writing stops before any work with one
line naming the holder (command, PID, since when), exit 2; the kernel frees the lock with its
holder, `kill -9` included. Real processes: a real `mage train` holds its folder."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from mage_core.io.workspace_lock import output_lock, output_lock_path

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]

PARAMS = {
    "env": {"name": "kuhn_poker"},
    "train": {"iterations": 200, "groups_per_iteration": 3, "eval_every": 0, "checkpoint_every": 1},
    "algorithm": {"group_size": 4},
    "evaluation": {"meta_episodes_per_opponent_seat": 4},
    "tournament": {"matches": []},
}

HOLD = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from mage_core.io.workspace_lock import output_lock
    with output_lock(Path(sys.argv[1]), sys.argv[2]):
        print("locked", flush=True)
        time.sleep(120)
""")


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _mage(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mage_core", *args], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "400"}, timeout=300)


def test_a_second_mage_train_on_the_same_out_stops_naming_the_first(tmp_path: Path) -> None:
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(PARAMS))
    out = tmp_path / "run"
    first = subprocess.Popen([sys.executable, "-m", "mage_core", "train", "--params", str(params), "--out", str(out),
                              "--resume", "auto"], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while not (out / "checkpoints" / "step-000001").exists():  # training, and writing its folder
            assert first.poll() is None and time.monotonic() < deadline, "the first training ended early"
            time.sleep(0.1)
        for resume in ("auto", "yes"):
            second = _mage(tmp_path, "train", "--params", str(params), "--out", str(out),
                           *(["--resume", resume] if resume == "auto" else ["--resume"]))
            message = " ".join(second.stderr.split())
            assert second.returncode == 2, second.stdout + second.stderr
            assert (f"--out {out}: another command is writing this folder (mage train --out {out}, PID {first.pid}, "
                    "since ") in message, message
            assert "Traceback" not in second.stderr and second.stdout == ""
        assert not (out / "superseded").exists()  # the second moved nothing aside
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    # The kernel freed the lock with its holder: the same command now resumes the killed run.
    # The commit point is the `latest` pointer, not the newest folder: a kill between a
    # checkpoint's rename into place and the pointer's move leaves the folder uncommitted.
    latest = (out / "checkpoints" / "latest").read_text(encoding="utf-8").strip()
    again = _mage(tmp_path, "train", "--params", str(params), "--out", str(out), "--resume", "--time-budget", "1e-9")
    assert again.returncode == 0, again.stderr
    assert f"resumed from {out / 'checkpoints' / latest}" in " ".join(again.stdout.split())


@pytest.mark.parametrize("command", ["evaluate", "sft"])
def test_evaluate_and_sft_on_a_held_out_stop_before_any_work(tmp_path: Path, command: str) -> None:
    (tmp_path / "params.yaml").write_text("seed: 0\n")
    out = tmp_path / "out"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(out), f"mage {command} --out {out}"], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        args = {"evaluate": ["evaluate", "--policy", str(tmp_path / "no-policy"), "--out", str(out)],
                "sft": ["sft", "--out", str(out)]}[command]
        done = _mage(tmp_path, *args)
    finally:
        holder.kill()
        holder.wait()
    message = " ".join(done.stderr.split())
    assert done.returncode == 2, done.stderr
    assert f"another command is writing this folder (mage {command} --out {out}, PID {holder.pid}, since " in message
    assert "nothing was written" in message and not out.exists()
    with output_lock(out, "after"):  # freed with its holder
        pass


def test_the_lock_file_changes_no_dvc_hash(tmp_path: Path) -> None:
    # The lock lies beside the folder, inside artifacts/eval (a dependency of the report stage):
    # the project's .dvcignore keeps it out of every hash DVC takes.
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    repo = tmp_path / "repo"
    (repo / "d" / "run").mkdir(parents=True)
    (repo / "d" / "run" / "metrics.json").write_text("{}")
    shutil.copy2(ROOT / ".dvcignore", repo / ".dvcignore")
    (repo / "dvc.yaml").write_text("stages:\n  use:\n    cmd: cat d/run/metrics.json > used.txt\n    deps:\n"
                                   "      - d\n    outs:\n      - used.txt\n")
    for step in (["git", "init", "-q"], [sys.executable, "-m", "dvc", "init", "-q"],
                 [sys.executable, "-m", "dvc", "repro", "-q"]):
        assert subprocess.run(step, cwd=repo, env=env, capture_output=True).returncode == 0
    with output_lock(repo / "d" / "run", "mage evaluate"):
        assert output_lock_path(repo / "d" / "run") == repo / "d" / ".run.mage.lock"
        assert (repo / "d" / ".run.mage.lock").is_file()
        status = subprocess.run([sys.executable, "-m", "dvc", "status", "-q"], cwd=repo, env=env, capture_output=True)
    assert status.returncode == 0, status.stdout


def test_the_ranks_a_command_launches_run_under_its_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mage_core.io.workspace_lock import HELD_ENV, OutputBusy

    out = tmp_path / "run"
    with output_lock(out, "mage train (launcher)") as fd:
        assert fd is not None
        with pytest.raises(OutputBusy, match=f"mage train \\(launcher\\), PID {os.getpid()}"):
            with output_lock(out, "another"):
                pass
        monkeypatch.setenv(HELD_ENV, str(output_lock_path(out)))
        with output_lock(out, "rank 0") as held:  # the launcher holds it for the ranks
            assert held is None
