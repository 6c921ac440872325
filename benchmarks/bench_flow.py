"""Orchestration overhead of ``mage reproduce``: flow wall time minus the stages' own compute.

Usage: ``python benchmarks/bench_flow.py [--profile smoke] [--max-concurrent N]``

Prepares two fresh copies of the profile's workspace (``artifacts/bench/flow-*``).
In the first it runs the whole flow (Prefect + DVC + MLflow); in the second it runs
each stage's command directly, with nothing around it, on the same schedule: a
stage starts when the stages it depends on are done, at most N at once
(``reproduce.max_concurrent`` unless given). The difference is what the
orchestration costs (Prefect's server and task runs, DVC's status checks, lock
files and caching, MLflow's parent and child runs); target: under 15% of the
flow's wall time.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def fresh_workspace(name: str, profile: str, max_concurrent: int | None = None) -> Path:
    from mage_core.stages.reproduce import prepare_workspace

    project = ROOT / "artifacts" / "bench" / name
    shutil.rmtree(project, ignore_errors=True)
    project.mkdir(parents=True)
    for file in ("params.yaml", "dvc.yaml", ".dvcignore"):
        shutil.copy2(ROOT / file, project / file)
    shutil.copytree(ROOT / "mage_core", project / "mage_core", ignore=shutil.ignore_patterns("__pycache__"))
    workspace = prepare_workspace(project, profile)
    if max_concurrent is not None:
        import yaml

        params = yaml.safe_load((workspace / "params.yaml").read_text())
        params["reproduce"]["max_concurrent"] = max_concurrent
        (workspace / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return workspace


def run_direct(graph: dict[str, list[str]], commands: dict[str, str], cwd: Path, env: dict[str, str],
               slots: int) -> tuple[float, dict[str, float]]:
    """Every command in dependency order, at most ``slots`` at once; wall time and each one's time."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    done = {stage: threading.Event() for stage in graph}
    gate = threading.BoundedSemaphore(slots)
    seconds: dict[str, float] = {}

    def one(stage: str) -> None:
        try:
            for upstream in graph[stage]:
                done[upstream].wait()
                if upstream not in seconds:
                    raise RuntimeError(f"{stage}: upstream {upstream} failed")
            with gate:
                seconds[stage] = timed(commands[stage], cwd, env)
        finally:
            done[stage].set()  # failed or not: nothing waits forever

    started = time.perf_counter()
    with ThreadPoolExecutor(len(graph)) as pool:
        for future in [pool.submit(one, stage) for stage in graph]:
            future.result()
    return time.perf_counter() - started, seconds


def timed(cmd: list[str] | str, cwd: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env, shell=isinstance(cmd, str), check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="smoke")
    parser.add_argument("--max-concurrent", type=int, help="stages at once (default: reproduce.max_concurrent)")
    args = parser.parse_args()
    from flows.dvc_stages import stage_env, stage_graph
    from mage_core.config import load_config

    env = stage_env({"PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_LOGGING_TO_API_ENABLED": "false"})
    env.pop("MLFLOW_TRACKING_URI", None)

    flow_ws = fresh_workspace("flow-orchestrated", args.profile, args.max_concurrent)
    slots = load_config(flow_ws / "params.yaml").reproduce.max_concurrent
    started = time.perf_counter()
    log = subprocess.run([sys.executable, "-m", "flows", "reproduce", str(flow_ws)], cwd=flow_ws, env=env,
                         check=True, capture_output=True, text=True)
    flow_s = time.perf_counter() - started
    in_flow = {m[1]: float(m[2]) for m in re.finditer(r"Task run '([^']+)' - \S+ done in ([0-9.]+) s",
                                                      log.stdout + log.stderr)}

    direct_ws = fresh_workspace("flow-direct", args.profile, args.max_concurrent)
    from dvc.repo import Repo

    with Repo(str(direct_ws)) as repo:
        commands = {stage.name: stage.cmd for stage in repo.index.stages}
    graph = stage_graph(direct_ws)
    direct_s, direct = run_direct(graph, commands, direct_ws, env, slots)

    print(f"profile {args.profile}: {len(direct)} stages, at most {slots} at once")
    for stage in graph:
        print(f"  {stage:<32} {direct[stage]:6.1f} s command alone, {in_flow.get(stage, float('nan')):6.1f} s as "
              "`dvc repro` in the flow")
    overhead = flow_s - direct_s
    print(f"flow wall time                     {flow_s:7.1f} s")
    print(f"commands alone, same schedule      {direct_s:7.1f} s")
    print(f"orchestration overhead             {overhead:7.1f} s = {100 * overhead / flow_s:.1f}% of the flow "
          f"(target < 15%)")


if __name__ == "__main__":
    os.environ.setdefault("DVC_NO_ANALYTICS", "1")
    main()
