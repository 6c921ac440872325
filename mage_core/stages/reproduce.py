"""``mage reproduce``: the paper reproduction (dvc.yaml) as one Prefect flow.

Without ``--profile`` the flow runs in the project itself, on params.yaml as it
is (the CPU default). ``--profile NAME`` applies the dotted-key overrides of
``reproduce.profiles.NAME`` in a workspace of its own,
``artifacts/profiles/NAME/`` (a small git + DVC repository holding params.yaml,
dvc.yaml, dvc.runs.yaml and a copy of mage_core, which the stages depend on), so a quick run
never touches the project's params, lock file or report. One thing comes back: a profile that runs
ablation grids of the project's ``sweep.grids`` records their verdicts, once its flow succeeds, in
``reports/profiles/NAME/`` (``mage_core.stages.ablation_records``), where the default report's
ablation section reads them.

The flow itself runs in a subprocess (``python -m flows reproduce``): nothing in
``mage_core`` imports Prefect (docs/architecture.md).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console

from mage_core.config import ConfigError, load_config
from mage_core.io.atomic import write_text_atomic
from mage_core.io.workspace_lock import LOCK_NAME, WorkspaceBusy, workspace_lock
from mage_core.stages import dvc_runs
from mage_core.stages.profiles import profile_params

console = Console(soft_wrap=True)
PROFILE_ROOT = Path("artifacts") / "profiles"


def _run(cmd: list[str], cwd: Path) -> None:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False,
                          env={**os.environ, "DVC_NO_ANALYTICS": "1"})
    if done.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` failed in {cwd}:\n{done.stderr or done.stdout}")


#: What a workspace's git leaves out: DVC's outputs, MLflow's store, the run lock.
WORKSPACE_IGNORED = ("artifacts/", "mlflow.db", "mlflow.db.init-lock", "mlartifacts/", "dvc_plots/", LOCK_NAME)
#: What a workspace's git commits: its inputs and DVC's record of them, never an output.
WORKSPACE_INPUTS = ("params.yaml", "dvc.yaml", dvc_runs.RUNS_FILE, "dvc.lock", ".dvcignore", ".gitignore", ".dvc", "mage_core")


def prepare_workspace(project: Path, profile: str) -> Path:
    """``artifacts/profiles/<profile>``: params (profile applied), dvc.yaml, code; git + DVC."""
    return write_workspace(project, project / PROFILE_ROOT / profile, profile_params(project / "params.yaml", profile),
                           f"profile {profile}")


def write_workspace(project: Path, workspace: Path, data: dict[str, Any], label: str) -> Path:
    """A DVC project of its own at ``workspace``: ``data`` as its params.yaml, the
    project's dvc.yaml and a copy of mage_core (which the stages depend on); a git
    commit of these inputs is the baseline `dvc params diff` and `dvc exp run`
    compare against. Finished stages of an earlier run are kept."""
    workspace.mkdir(parents=True, exist_ok=True)
    write_text_atomic(workspace / "params.yaml", yaml.safe_dump(data, sort_keys=False))
    for name in ("dvc.yaml", ".dvcignore"):
        shutil.copy2(project / name, workspace / name)
    shutil.rmtree(workspace / "mage_core", ignore_errors=True)
    shutil.copytree(project / "mage_core", workspace / "mage_core",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    dvc_runs.write(workspace)  # from the workspace's own runs and its copy of the code
    from mage_core.stages.ablation_records import ensure_index

    ensure_index(workspace)  # the ablations stage depends on reports/profiles
    if not (workspace / ".git").exists():
        _run(["git", "init", "-q"], workspace)
    ignored = workspace / ".gitignore"
    listed = ignored.read_text().splitlines() if ignored.exists() else []
    missing = [name for name in WORKSPACE_IGNORED if name not in listed]  # an older workspace lacks the lock
    if missing:
        write_text_atomic(ignored, "".join(line + "\n" for line in listed + missing))
    if not (workspace / ".dvc").exists():
        _run([sys.executable, "-m", "dvc", "init", "-q"], workspace)
    # The inputs only: a stage killed mid-write leaves outputs DVC has not git-ignored yet
    inputs = [name for name in WORKSPACE_INPUTS if (workspace / name).exists()]
    _run(["git", "add", "-A", "--", *inputs], workspace)
    if subprocess.run(["git", "diff", "--cached", "--quiet"], cwd=workspace, check=False).returncode:
        _run(["git", "-c", "user.name=mage", "-c", "user.email=mage@localhost", "commit", "-q", "-m",
              f"{label}: inputs"], workspace)
    return workspace


def run(params: str, profile: str | None = None, flow: str = "reproduce") -> int:
    project = Path(params).resolve().parent
    load_config(params)  # a bad params file stops here, before anything is written
    if not (project / "dvc.yaml").is_file():
        raise ConfigError("command line", [f"{project}: no dvc.yaml (run from the project root)"])
    target = project / PROFILE_ROOT / profile if profile else project
    try:
        with workspace_lock(target, f"mage {flow}") as lock:  # before anything is written there
            return _run_locked(project, profile, flow, lock)
    except WorkspaceBusy as err:
        raise ConfigError("command line", [str(err)]) from None


def _run_locked(project: Path, profile: str | None, flow: str, lock: int) -> int:
    workspace = prepare_workspace(project, profile) if profile else project
    ws_params = workspace / "params.yaml"
    for name in load_config(ws_params).reproduce.runs:  # every run's own overrides, before any work
        load_config(ws_params, run=name)
    if not (workspace / ".dvc").exists():
        raise ConfigError("command line", [f"{workspace}: not a DVC project (run `dvc init` once)"])
    if dvc_runs.write(workspace):  # reproduce.runs edited since: the stage graph follows them
        console.print(f"rewrote {workspace / dvc_runs.RUNS_FILE} from params.yaml")
    what = "evaluating" if flow == "evaluate" else "reproducing"
    console.print(f"{what} {'profile ' + profile if profile else 'the CPU default'} in {workspace}")
    if not run_flow([flow, str(workspace)], workspace, lock):
        return 1
    if profile and flow == "reproduce":  # its ablation verdicts, where the default report reads them
        from mage_core.stages.ablation_records import record

        recorded = record(project, profile, workspace)
        if recorded is not None:
            console.print(f"  recorded: {recorded} (the default report's ablation section reads it)")
    console.print(f"  report:   {workspace / 'reports' / 'report.md'}\n"
                  f"  lineage:  cd {workspace} && dvc dag && dvc metrics show && dvc params diff")
    return 0


def run_flow(args: list[str], project: Path, lock: int | None = None) -> bool:
    """``python -m flows ARGS`` in ``project``; prints how long it took and where its
    runs are, or that it failed (finished stages are kept). True when it succeeded.
    ``lock``: the workspace's locked file (``workspace_lock``), held by the flow too."""
    started = time.perf_counter()
    from mage_core.io.lifeline import LIFELINE_ENV

    # The flow, and everything it starts, dies with this process, also on its kill -9 (io/lifeline.py).
    done = subprocess.run([sys.executable, "-m", "flows", *args], cwd=project, check=False,
                          pass_fds=(lock,) if lock is not None else (), env={**os.environ, LIFELINE_ENV: "1"})
    if done.returncode != 0:
        console.print(f"[bold red]the flow failed[/] (exit {done.returncode}); finished stages are kept: "
                      "rerun the same command to resume")
        return False
    store = os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{project / 'mlflow.db'}"
    console.print(f"done in {(time.perf_counter() - started) / 60:.1f} min\n"
                  f"  MLflow:   mage ui --params {project / 'params.yaml'}   (store: {store})")
    return True
