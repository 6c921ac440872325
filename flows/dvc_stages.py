"""The DVC side of the flows: the stage graph, up-to-date checks, running one stage.

The order and the dependencies come from DVC's own graph (``dvc.yaml``), so the
flows never restate them; DVC decides what is up to date, so Prefect caches
nothing of its own.

Independent stages may run at the same time: ``dvc repro`` releases the
repository lock while a stage's command runs and takes it again to record the
result (DVC's documented "parallel stage execution"); ``--wait-for-lock`` makes
a second ``dvc repro`` wait for those moments instead of failing.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

DVC_ENV = {"DVC_NO_ANALYTICS": "1"}
#: DVC's Python API is not made for threads: one call at a time in this process.
_DVC_API = threading.Lock()


def stage_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a stage command: this interpreter's ``mage`` first on PATH."""
    env = {**os.environ, **DVC_ENV, **(extra or {})}
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


def _repo(project_dir: Path):  # noqa: ANN202
    from dvc.repo import Repo

    # Wait for the repository lock (held briefly by a concurrent `dvc repro` while it
    # records a stage) rather than fail: the CLI's --wait-for-lock.
    return Repo(str(project_dir), _wait_for_lock=True)


def stage_graph(project_dir: Path) -> dict[str, list[str]]:
    """Every stage of ``dvc.yaml`` -> the stages it depends on; dependencies come
    first, ties in file order."""
    import networkx as nx

    os.environ.update(DVC_ENV)
    with _DVC_API, _repo(project_dir) as repo:
        graph = repo.index.graph  # edges point from a stage to the stages it depends on
        position = {stage: i for i, stage in enumerate(repo.index.stages)}
        order = nx.lexicographical_topological_sort(graph.reverse(copy=True), key=lambda s: position[s])
        # names as in dvc.yaml, whatever the cwd
        return {stage.name: sorted((d.name for d in graph.successors(stage)), key=str) for stage in order}


def stage_order(project_dir: Path) -> list[str]:
    """Every stage of ``dvc.yaml``, dependencies first, ties in file order."""
    return list(stage_graph(project_dir))


def missing_outputs(project_dir: Path, stages: list[str]) -> list[str]:
    """The stages among ``stages`` with an output that is not on disk (never run, or removed)."""
    os.environ.update(DVC_ENV)
    with _DVC_API, _repo(project_dir) as repo:
        return [stage.name for stage in repo.index.stages
                if stage.name in stages and any(not out.exists for out in stage.outs)]


def is_up_to_date(project_dir: Path, stage: str) -> bool:
    """``dvc status STAGE`` (in this process): True when neither its deps, params
    nor outs changed."""
    os.environ.update(DVC_ENV)
    with _DVC_API, _repo(project_dir) as repo:
        # dvc.yaml's path, not the cwd's: DVC resolves a bare stage name against the cwd
        return not repo.status(targets=[f"{Path(project_dir).resolve() / 'dvc.yaml'}:{stage}"])


def repro(project_dir: Path, stage: str, extra_env: dict[str, str] | None = None) -> None:
    """``dvc repro --single-item STAGE``: run one stage (its upstream already ran)."""
    from mage_core.io.lifeline import wrap

    # dvc dies with this flow (lifeline), and the stage commands with dvc (LIFELINE_ENV, inherited)
    done = subprocess.run(wrap([sys.executable, "-m", "dvc", "--wait-for-lock", "repro", "--single-item", stage]),
                          cwd=project_dir, env=stage_env(extra_env), check=False)
    if done.returncode != 0:
        raise RuntimeError(f"stage {stage} failed (`dvc repro --single-item {stage}` exited {done.returncode} "
                           f"in {project_dir}); its output is above")
