"""One run at a time in a workspace (issue 25, item 6): a second `mage reproduce` in a
workspace another run holds stops with one line naming the holder, before it writes
anything; the flow it starts keeps the lock after the command that started it is gone."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Callable

import pytest

from mage_core.cli import main
from mage_core.io.workspace_lock import LOCK_NAME, WorkspaceBusy, workspace_lock

pytestmark = pytest.mark.integration

HOLD = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from mage_core.io.workspace_lock import workspace_lock
    with workspace_lock(Path(sys.argv[1]), "mage reproduce (test)"):
        print("locked", flush=True)
        time.sleep(120)
""")


def _holder(workspace: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(workspace)], stdout=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parents[2])
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    return proc


def test_a_second_reproduce_in_a_busy_workspace_stops_naming_the_holder(
        tmp_path: Path, copy_project: Callable[[Path], Path], capsys: pytest.CaptureFixture[str]) -> None:
    project = copy_project(tmp_path)
    workspace = project / "artifacts" / "profiles" / "smoke"
    holder = _holder(workspace)
    try:
        code = main(["reproduce", "--params", str(project / "params.yaml"), "--profile", "smoke"])
        err = " ".join(capsys.readouterr().err.split())
    finally:
        holder.kill()
        holder.wait()
    assert code == 2
    assert "another run is live in this workspace" in err and f"PID {holder.pid}" in err
    assert sorted(p.name for p in workspace.iterdir()) == [LOCK_NAME]  # nothing written before the lock
    with workspace_lock(workspace, "after"):  # the kernel freed it with the holder
        pass


def test_a_child_given_the_lock_keeps_it_after_its_parent_lets_go(tmp_path: Path) -> None:
    with workspace_lock(tmp_path, "parent") as fd:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], pass_fds=(fd,))
    try:
        with pytest.raises(WorkspaceBusy, match=f"parent, PID {os.getpid()}"):
            with workspace_lock(tmp_path, "second"):
                pass
    finally:
        child.kill()
        child.wait()
    with workspace_lock(tmp_path, "third"):
        pass
