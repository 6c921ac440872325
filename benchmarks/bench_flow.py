"""Orchestration overhead of ``mage reproduce``: flow wall time minus the stages' own compute.

Usage: ``python benchmarks/bench_flow.py [--profile smoke]``

Prepares two fresh copies of the profile's workspace (``artifacts/bench/flow-*``).
In the first it runs the whole flow (Prefect + DVC + MLflow); in the second it runs
each stage's command directly, in DVC's order, with nothing around it. The
difference is what the orchestration costs (Prefect's ephemeral server and task
runs, DVC's status checks and lock files, MLflow's parent and child runs);
target: under 15% of the flow's wall time.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def fresh_workspace(name: str, profile: str) -> Path:
    from mage_core.stages.reproduce import prepare_workspace

    project = ROOT / "artifacts" / "bench" / name
    shutil.rmtree(project, ignore_errors=True)
    project.mkdir(parents=True)
    for file in ("params.yaml", "dvc.yaml", ".dvcignore"):
        shutil.copy2(ROOT / file, project / file)
    shutil.copytree(ROOT / "mage_core", project / "mage_core", ignore=shutil.ignore_patterns("__pycache__"))
    return prepare_workspace(project, profile)


def timed(cmd: list[str] | str, cwd: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env, shell=isinstance(cmd, str), check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="smoke")
    args = parser.parse_args()
    from flows.dvc_stages import stage_env, stage_order

    env = stage_env({"PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_LOGGING_TO_API_ENABLED": "false"})
    env.pop("MLFLOW_TRACKING_URI", None)

    flow_ws = fresh_workspace("flow-orchestrated", args.profile)
    flow_s = timed([sys.executable, "-m", "flows", "reproduce", str(flow_ws)], flow_ws, env)

    direct_ws = fresh_workspace("flow-direct", args.profile)
    from dvc.repo import Repo

    with Repo(str(direct_ws)) as repo:
        commands = {stage.name: stage.cmd for stage in repo.index.stages}
    direct = {stage: timed(commands[stage], direct_ws, env) for stage in stage_order(direct_ws)}
    direct_s = sum(direct.values())

    print(f"profile {args.profile}: {len(direct)} stages")
    for stage, seconds in direct.items():
        print(f"  {stage:<32} {seconds:6.1f} s (command alone)")
    overhead = flow_s - direct_s
    print(f"flow wall time          {flow_s:7.1f} s")
    print(f"stages' own compute     {direct_s:7.1f} s")
    print(f"orchestration overhead  {overhead:7.1f} s = {100 * overhead / flow_s:.1f}% of the flow "
          f"(target < 15%)")


if __name__ == "__main__":
    os.environ.setdefault("DVC_NO_ANALYTICS", "1")
    main()
