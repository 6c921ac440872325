"""The DVC side of the flows: stage order, up-to-date checks, running one stage.

The order comes from DVC's own graph (``dvc.yaml``), so the flows never restate
it; DVC decides what is up to date, so Prefect caches nothing of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

DVC_ENV = {"DVC_NO_ANALYTICS": "1"}


def stage_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a stage command: this interpreter's ``mage`` first on PATH."""
    env = {**os.environ, **DVC_ENV, **(extra or {})}
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


def stage_order(project_dir: Path) -> list[str]:
    """Every stage of ``dvc.yaml``, dependencies first, ties in file order."""
    import networkx as nx
    from dvc.repo import Repo

    with Repo(str(project_dir)) as repo:
        graph = repo.index.graph  # edges point from a stage to the stages it depends on
        position = {stage: i for i, stage in enumerate(repo.index.stages)}
        order = nx.lexicographical_topological_sort(graph.reverse(copy=True), key=lambda s: position[s])
        return [stage.name for stage in order]  # names as in dvc.yaml, whatever the cwd


def is_up_to_date(project_dir: Path, stage: str) -> bool:
    """``dvc status STAGE``: True when neither its deps, params nor outs changed."""
    done = subprocess.run([sys.executable, "-m", "dvc", "status", stage, "--json"], cwd=project_dir,
                          env=stage_env(), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"`dvc status {stage}` failed in {project_dir}:\n{done.stderr or done.stdout}")
    return not json.loads(done.stdout or "{}")


def repro(project_dir: Path, stage: str, extra_env: dict[str, str] | None = None) -> None:
    """``dvc repro --single-item STAGE``: run one stage (its upstream already ran)."""
    done = subprocess.run([sys.executable, "-m", "dvc", "repro", "--single-item", stage], cwd=project_dir,
                          env=stage_env(extra_env), check=False)
    if done.returncode != 0:
        raise RuntimeError(f"stage {stage} failed (`dvc repro --single-item {stage}` exited {done.returncode}); "
                           "its output is above")
