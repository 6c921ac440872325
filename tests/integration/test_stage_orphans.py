"""A stage command dies with the `dvc repro` that runs it, however that `dvc repro` was started
(issue 39): a `kill -9` of a `dvc repro` started by hand used to leave its stage's `mage train`
running to the end (handed to init), and the next `dvc repro` then found that finished run,
moved it aside and trained again. Real `dvc repro` in a temporary git repository, real
`kill -9`; DVC runs a command through `$SHELL -c`: bash execs a lone command, dash (`/bin/sh`)
keeps the shell between dvc and the command."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signals are Linux's")]

#: A stage command that runs for minutes and starts in a second: the lifeline is set up before any work.
LONG_COMMAND = ["-m", "mage_core", "tournament", "--game", "tic_tac_toe", "--a", "mcts-100", "--b", "mcts-100",
                "--games", "100000", "--out", "-"]


def sh(repo: Path, *args: str, shell: str = "/bin/bash") -> subprocess.CompletedProcess:
    return subprocess.run(list(args), cwd=repo, env=_env(shell), capture_output=True, text=True, check=False,
                          timeout=600)


def _env(shell: str) -> dict[str, str]:
    return {**os.environ, "DVC_NO_ANALYTICS": "1", "SHELL": shell, "COLUMNS": "200", "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}


def _repo(root: Path, cmd: str, outs: list[str], params: dict | None = None) -> Path:
    """A git repository with DVC and one stage ``run`` running ``cmd`` (its outs persistent, as
    the train stages of dvc.yaml)."""
    repo = root / "repo"
    repo.mkdir()
    (repo / "params.yaml").write_text(yaml.safe_dump(params or {"seed": 0}))
    stage = {"cmd": cmd, "params": sorted(params or {"seed": 0}),
             "outs": [{out: {"persist": True}} for out in outs]}
    (repo / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"run": stage}}))
    for step in (("git", "init", "-q"), (sys.executable, "-m", "dvc", "init", "-q")):
        done = sh(repo, *step)
        assert done.returncode == 0, done.stderr
    return repo


def _mage_under(pid: int, timeout_s: float = 60.0) -> tuple[int, list[int]]:
    """The ``python -m mage_core`` process below ``pid`` and the processes between them (the shell)."""
    import psutil

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for child in psutil.Process(pid).children(recursive=True):
            try:
                if "mage_core" in child.cmdline():  # a shell's cmdline holds the command as one string
                    chain = [p.pid for p in child.parents()]
                    return child.pid, chain[:chain.index(pid)]
            except (psutil.NoSuchProcess, ValueError):
                continue
        time.sleep(0.1)
    raise AssertionError(f"no mage_core process below {pid}")


def _gone(pid: int, timeout_s: float) -> float | None:
    """Seconds until ``pid`` has exited (or is a zombie waiting for init), or None if not within ``timeout_s``."""
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return time.monotonic() - start
        except OSError:
            return time.monotonic() - start
        time.sleep(0.05)
    return None


def _kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.mark.parametrize("shell", ["/bin/bash", "/bin/sh"], ids=["bash", "sh"])
def test_a_stage_command_dies_with_a_dvc_repro_killed_by_hand(tmp_path: Path, shell: str) -> None:
    if not Path(shell).exists():
        pytest.skip(f"no {shell}")
    repo = _repo(tmp_path, " ".join([sys.executable, *LONG_COMMAND]), ["out"])
    dvc = subprocess.Popen([sys.executable, "-m", "dvc", "repro"], cwd=repo, env=_env(shell),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    stage, between = -1, []
    try:
        stage, between = _mage_under(dvc.pid)
        time.sleep(3.0)  # playing: well past its lifeline set-up
        assert _gone(stage, 0.1) is None
        os.kill(dvc.pid, signal.SIGKILL)
        dvc.wait()
        seconds = _gone(stage, 15.0)
        assert seconds is not None, f"the stage command {stage} outlived its dvc repro by 15 s"
        for pid in between:  # the shell between them, where there is one, goes too
            assert _gone(pid, 5.0) is not None
    finally:
        _kill([stage, *between])
        if dvc.poll() is None:
            dvc.kill()
            dvc.wait()


def test_a_detached_mage_outlives_the_shell_that_started_it(tmp_path: Path) -> None:
    # `nohup mage ... &` from a shell that then exits: no dvc above it, nothing to die with.
    env = {k: v for k, v in _env("/bin/bash").items() if k not in ("DVC_STAGE", "MAGE_DIE_WITH_PARENT")}
    (tmp_path / "params.yaml").write_text("seed: 0\n")
    command = " ".join([sys.executable, *LONG_COMMAND])
    done = subprocess.run(["bash", "-c", f"nohup {command} >/dev/null 2>&1 & echo $!"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    pid = int(done.stdout.strip())
    try:
        assert _gone(pid, 5.0) is None, "a detached mage died with the shell that started it"
    finally:
        _kill([pid])


PARAMS = {
    "env": {"name": "kuhn_poker"},
    "train": {"iterations": 12, "groups_per_iteration": 3, "eval_every": 4, "checkpoint_every": 1},
    "algorithm": {"group_size": 4},
    "evaluation": {"meta_episodes_per_opponent_seat": 4},
    "tournament": {"matches": []},
}


@pytest.mark.slow
def test_kill_9_of_a_hand_started_dvc_repro_then_repro_resumes_the_training(tmp_path: Path) -> None:
    """The whole fault: `dvc repro` (started by hand) killed during `mage train`; the training goes
    with it, and the next `dvc repro` resumes it from its last checkpoint (nothing superseded),
    ending with an uninterrupted run's metrics.jsonl and summary.json."""
    from mage_core.trainers.checkpoint import CheckpointManager

    cmd = f"{sys.executable} -m mage_core train --params params.yaml --resume auto --out out/run"
    repo = _repo(tmp_path, cmd, ["out/run/best", "out/run/metrics.jsonl", "out/run/summary.json"], PARAMS)
    straight = tmp_path / "straight"
    done = sh(repo, sys.executable, "-m", "mage_core", "train", "--params", "params.yaml", "--out", str(straight))
    assert done.returncode == 0, done.stderr
    dvc = subprocess.Popen([sys.executable, "-m", "dvc", "repro"], cwd=repo, env=_env("/bin/sh"),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    stage, between = -1, []
    try:
        stage, between = _mage_under(dvc.pid)
        manager = CheckpointManager(repo / "out" / "run" / "checkpoints")
        deadline = time.monotonic() + 300
        while manager.latest() is None or manager.latest().name < "step-000002":
            assert dvc.poll() is None and time.monotonic() < deadline, "training ended before it could be killed"
            time.sleep(0.05)
        os.kill(dvc.pid, signal.SIGKILL)
        dvc.wait()
        assert _gone(stage, 15.0) is not None, "mage train outlived its dvc repro"
        stopped_at = manager.latest().name
        assert stopped_at < "step-000012"
    finally:
        _kill([stage, *between])
    again = sh(repo, sys.executable, "-m", "dvc", "repro", shell="/bin/sh")
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"resumed from out/run/checkpoints/{stopped_at} at iteration" in " ".join(again.stdout.split()), again.stdout
    assert not (repo / "out" / "run" / "superseded").exists()
    for name in ("metrics.jsonl", "summary.json"):
        assert (repo / "out" / "run" / name).read_bytes() == (straight / name).read_bytes(), name
    assert json.loads((repo / "out" / "run" / "summary.json").read_text())["iterations"] == 12


def test_a_finished_run_that_dvc_did_not_record_is_kept_not_trained_again(tmp_path: Path) -> None:
    """Decision 1(b) of issue 39: the run a killed `dvc repro` left finished (or one DVC re-runs for a
    setting that cannot change it, here train.checkpoint_every) is kept by `--resume auto`, byte for
    byte, and what dvc.lock records is what a rerun would have written (it used to be moved to
    superseded/ and trained again)."""
    params = {**PARAMS, "train": {**PARAMS["train"], "iterations": 4, "eval_every": 2}}
    cmd = f"{sys.executable} -m mage_core train --params params.yaml --resume auto --out out/run"
    outs = ["out/run/best", "out/run/metrics.jsonl", "out/run/summary.json"]
    repo = _repo(tmp_path, cmd, outs, params)
    done = sh(repo, *cmd.split())  # the stage command finished, its dvc repro gone before it recorded it
    assert done.returncode == 0, done.stderr
    run = repo / "out" / "run"
    files = {p: p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}
    again = sh(repo, sys.executable, "-m", "dvc", "repro")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "kept, nothing trained again" in " ".join(again.stdout.split()), again.stdout
    assert not (run / "superseded").exists()
    assert {p: p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file() and p.name != ".gitignore"} == files
    lock = yaml.safe_load((repo / "dvc.lock").read_text())["stages"]["run"]["outs"]
    # A setting that cannot change the run: DVC re-runs the stage, the run is kept, dvc.lock's outs stay.
    (repo / "params.yaml").write_text(yaml.safe_dump({**params, "train": {**params["train"], "checkpoint_every": 2}}))
    third = sh(repo, sys.executable, "-m", "dvc", "repro")
    assert third.returncode == 0 and "kept, nothing trained again" in " ".join(third.stdout.split()), third.stdout
    assert yaml.safe_load((repo / "dvc.lock").read_text())["stages"]["run"]["outs"] == lock
    assert sh(repo, sys.executable, "-m", "dvc", "status", "-q").returncode == 0
