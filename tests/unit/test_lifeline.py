"""mage_core/io/lifeline.py: processes that die with their parent, also on its kill -9 (real
processes and signals; Linux)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.unit, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")]
ROOT = Path(__file__).resolve().parents[2]


def _gone(pid: int, timeout_s: float = 15.0) -> bool:
    """Whether ``pid`` has exited (or is a zombie waiting for init to reap it) within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        except OSError:
            return True
        time.sleep(0.05)
    return False


def _parent(code: str) -> tuple[subprocess.Popen, list[int]]:
    """A parent process running ``code`` (which prints the pids it wants watched, one a line, then
    sleeps), and those pids."""
    parent = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    pids = [int(parent.stdout.readline()) for _ in range(code.count("print("))]
    return parent, pids


def test_a_wrapped_command_dies_with_its_parent_on_kill_9() -> None:
    parent, (child,) = _parent(
        "import subprocess, time\nfrom mage_core.io.lifeline import wrap\n"
        "p = subprocess.Popen(wrap(['sleep', '60']))\nprint(p.pid, flush=True)\ntime.sleep(60)")
    deadline = time.monotonic() + 10
    while Path(f"/proc/{child}/comm").read_text().strip() != "sleep" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert Path(f"/proc/{child}/comm").read_text().strip() == "sleep"  # exec: nothing in between
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    assert _gone(child)


def test_a_group_dies_whole_with_its_parent_grandchildren_included() -> None:
    # As `mage ui` starts `mlflow server`, whose own workers would outlive it: the group goes.
    inner = "import subprocess, time; q = subprocess.Popen(['sleep', '60']); print(q.pid, flush=True); time.sleep(60)"
    parent, (leader, grandchild) = _parent(
        "import subprocess, sys, time\nfrom mage_core.io.lifeline import wrap\n"
        f"p = subprocess.Popen(wrap([sys.executable, '-c', {inner!r}], group=True), start_new_session=True)\n"
        "print(p.pid, flush=True)\ntime.sleep(60)")
    assert not _gone(grandchild, 0.2) and os.getpgid(grandchild) == leader
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    assert _gone(leader) and _gone(grandchild)


@pytest.mark.parametrize("asked", [True, False], ids=["LIFELINE_ENV=1", "unset"])
def test_our_entry_points_die_with_their_parent_when_the_tree_asks(asked: bool) -> None:
    # `mage` and `python -m flows` call from_environment() first: a stage under dvc dies with dvc.
    child_code = "from mage_core.io.lifeline import from_environment; from_environment(); import time; time.sleep(60)"
    env_line = ("os.environ['MAGE_DIE_WITH_PARENT'] = '1'" if asked else "os.environ.pop('MAGE_DIE_WITH_PARENT', None)")
    parent, (child,) = _parent(
        f"import os, subprocess, sys, time\n{env_line}\n"
        f"p = subprocess.Popen([sys.executable, '-c', {child_code!r}])\nprint(p.pid, flush=True)\ntime.sleep(60)")
    time.sleep(1.0)  # the child has made its prctl call
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    try:
        assert _gone(child, 10.0 if asked else 1.0) == asked
    finally:
        try:
            os.kill(child, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_the_wrapper_without_a_command_prints_its_usage() -> None:
    from mage_core.io.lifeline import main

    assert main([]) == 2 and main(["--group"]) == 2 and main(["--group", "--grace"]) == 2


def test_a_command_that_cannot_run_is_one_line_and_127() -> None:
    done = subprocess.run([sys.executable, "-m", "mage_core.io.lifeline", "--", "no-such-command-here"], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 127 and done.stderr.strip() == (
        "lifeline: cannot run no-such-command-here: No such file or directory")


@pytest.mark.parametrize("asked", [True, False], ids=["LIFELINE_ENV=1", "unset"])
def test_a_pipeline_stage_unwinds_on_sigterm(asked: bool, tmp_path: Path) -> None:
    # A stage under dvc gets SIGTERM when dvc dies: `mage` raises SystemExit(143) so that its `finally`
    # blocks run (the MLflow run marked KILLED, vLLM and Ray shut down); outside a pipeline, SIGTERM
    # ends it as before.
    (tmp_path / "params.yaml").write_text((ROOT / "params.yaml").read_text())
    env = {**os.environ, "MAGE_DIE_WITH_PARENT": "1"} if asked else {
        k: v for k, v in os.environ.items() if k != "MAGE_DIE_WITH_PARENT"}
    stage = subprocess.Popen([sys.executable, "-m", "mage_core", "tournament", "--game", "tic_tac_toe", "--a", "mcts-100",
                              "--b", "mcts-100", "--games", "100000", "--out", "-"], cwd=tmp_path, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(3.0)  # playing
    stage.send_signal(signal.SIGTERM)
    stage.wait(timeout=30)
    assert stage.returncode == (143 if asked else -signal.SIGTERM)


def test_proc_stat_fields_survive_a_command_name_with_a_parenthesis(tmp_path: Path) -> None:
    # A process named "a) b" writes "<pid> (a) b) S <ppid> <pgrp> ..."; the fields must be
    # read after the last ")" so the state, parent and group come out right.
    from mage_core.io.procfs import start_ticks, stat_fields

    script = tmp_path / "a) b"
    script.write_text("#!/bin/sh\nsleep 30\n")
    script.chmod(0o755)
    child = subprocess.Popen([str(script)])
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            fields = stat_fields(child.pid)
            if fields is not None and int(fields[1]) == os.getpid():
                break
            time.sleep(0.05)
        assert fields is not None and len(fields[0]) == 1 and int(fields[1]) == os.getpid()  # state, parent
        assert int(fields[2]) == os.getpgid(child.pid)
        assert start_ticks(child.pid) is not None and int(start_ticks(child.pid)) > 0
    finally:
        child.kill()
        child.wait()
    assert stat_fields(child.pid) is None and start_ticks(child.pid) is None


def test_the_dvc_that_runs_a_stage_command_is_found_by_its_environment_not_its_name() -> None:
    # DVC sets DVC_STAGE for its stage command only: the nearest ancestor without it (parent, or
    # the parent's parent when a shell stands between) is dvc. A process further down (a rank under
    # torchrun, under the stage command) inherits DVC_STAGE from above and is left alone.
    code = textwrap.dedent("""
        import os, subprocess, sys
        from mage_core.io.lifeline import dvc_runner
        depth = int(sys.argv[1])
        print(depth, os.getpid(), os.getppid(), dvc_runner(), flush=True)
        if depth < 3:
            env = {**os.environ, "DVC_STAGE": "train@run"}
            subprocess.run([sys.executable, "-c", sys.argv[2], str(depth + 1), sys.argv[2]], env=env, check=True)
    """)
    env = {k: v for k, v in os.environ.items() if k != "DVC_STAGE"}
    done = subprocess.run([sys.executable, "-c", code, "0", code], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60, check=True)
    rows = [line.split(" ", 3) for line in done.stdout.splitlines()]
    pids = [int(row[1]) for row in rows]
    assert [row[3] for row in rows] == ["None", f"({pids[0]}, None)", f"({pids[0]}, {pids[1]})", "None"]


def test_processes_that_join_a_kept_group_die_with_the_keepers_parent() -> None:
    # As a local Ray instance's processes do (mage_core/backends/ray_local.py): started with
    # process_group=<the keeper's pid> by a parent that is then killed, they go with it, even one
    # that ignores SIGTERM (after the keeper's grace).
    inner = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    parent, (keeper, stubborn, plain) = _parent(
        "import subprocess, sys, time\nfrom mage_core.io.lifeline import keep_group\n"
        "k = keep_group(1.0)\nprint(k.pid, flush=True)\n"
        f"a = subprocess.Popen([sys.executable, '-c', {inner!r}], process_group=k.pid)\n"
        "b = subprocess.Popen(['sleep', '60'], process_group=k.pid)\n"
        "print(a.pid, flush=True)\nprint(b.pid, flush=True)\ntime.sleep(60)")
    assert os.getpgid(stubborn) == os.getpgid(plain) == keeper != os.getpgid(parent.pid)
    time.sleep(0.5)  # the stubborn one has set its handler
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    started = time.monotonic()
    assert _gone(plain, 5.0) and _gone(stubborn, 5.0) and _gone(keeper, 5.0)
    assert time.monotonic() - started < 4.0  # the grace (1 s), not the default 10 s
