"""``sweep``: an ablation grid as one Prefect flow (``mage sweep``).

The grid is planned and every point validated first (``mage_core.stages.sweep``):
a bad key or value in any point stops the flow before anything is written.
Each point gets a DVC workspace of its own; its training and evaluation stages
are task runs named ``<point>/<stage>``. Points run side by side, at most
``sweep.max_concurrent`` stages at once (locally, also at most the cores), in
threads of this process or, with ``ray=True`` or ``RAY_ADDRESS`` set, as Ray
tasks of one CPU each on that cluster (the workspaces must then be on a file
system every node sees, and MLflow a server they reach). A re-run skips what
DVC finds done. At the end the ablation table and bar chart are written.

MLflow: the sweep is a parent run, each point a child run (its varied values as
params, its headline figures as metrics), each executed stage a child of its
point.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger

from flows.dvc_stages import stage_graph
from flows.graph import StageJob, init_ray, run_graph, stage_resources
from flows.reproduce import project_settings


def point_jobs(point: Any, parent_run_id: str | None) -> list[StageJob]:
    """The stages of a point's own run (``train@<point>``, ``evaluate@<point>``) in its
    workspace, and those they depend on (``data@<task>`` for a task with data files:
    only its own, dvc.runs.yaml)."""
    graph = stage_graph(point.workspace)
    wanted = [stage for stage in graph if stage.endswith(f"@{point.name}")]
    needed: set[str] = set()
    while wanted:
        stage = wanted.pop()
        if stage not in needed:
            needed.add(stage)
            wanted.extend(graph[stage])
    mine = {stage: ups for stage, ups in graph.items() if stage in needed}
    return [StageJob(point.workspace, stage, f"{point.name}/{stage}",
                     tuple(f"{point.name}/{u}" for u in ups if u in mine), parent_run_id,
                     *stage_resources(point.workspace, stage))
            for stage, ups in mine.items()]


def ray_slots(grid_plan: Any) -> int:
    """Stages at once on Ray: ``sweep.max_concurrent``, at most one per point."""
    return min(grid_plan.max_concurrent, len(grid_plan.points))


def start_ray(project_dir: str, grid: str | None, vary: list[str], name: str | None, profile: str | None,
              overrides: list[str], max_concurrent: int | None) -> None:
    """Start (or connect to) the sweep's Ray before its flow runs (``python -m flows``), so that a
    local instance that does not start is one line (``RayStartError``) instead of a failed flow
    run's traceback; the flow then finds Ray initialized."""
    from mage_core.stages.sweep import plan

    grid_plan = plan(Path(project_dir).resolve() / "params.yaml", grid, vary, name, profile, overrides,
                     max_concurrent)
    init_ray(ray_slots(grid_plan))


@flow(name="sweep", log_prints=True)
def sweep(project_dir: str = ".", grid: str | None = None, vary: list[str] | None = None, name: str | None = None,
          profile: str | None = None, overrides: list[str] | None = None, max_concurrent: int | None = None,
          ray: bool = False) -> dict[str, Any]:
    """Plan and validate the grid, run its points, write the ablation summary."""
    from mage_core.stages.sweep import local_concurrency, plan, prepare, summarize

    logger = get_run_logger()
    root = Path(project_dir).resolve()
    grid_plan = plan(root / "params.yaml", grid, vary or (), name, profile, overrides or (), max_concurrent)
    prepare(root, grid_plan)
    use_ray = ray or bool(os.environ.get("RAY_ADDRESS"))
    slots = ray_slots(grid_plan) if use_ray else local_concurrency(grid_plan)
    where = init_ray(slots) if use_ray else "this machine"
    logger.info("sweep %s: %d point(s), %d at a time on %s", grid_plan.name, len(grid_plan.points), slots, where)
    tracking, _ = project_settings(root)
    parent, points = None, {}
    if tracking is not None:
        from mage_core.tracking.mlflow_tracker import MlflowTracker, run_tags

        parent = MlflowTracker.start(tracking.uri, tracking.experiment, f"sweep {grid_plan.name}",
                                     tags={**run_tags(root, None, None), "sweep.name": grid_plan.name})
        parent.log_params({"sweep.points": len(grid_plan.points), "sweep.max_concurrent": slots,
                           "sweep.executor": "ray" if use_ray else "local",
                           **{f"sweep.vary.{k}": v for k, v in grid_plan.grid.vary.items()},
                           **{f"sweep.set.{k}": v for k, v in grid_plan.grid.set.items()}})
        for point in grid_plan.points:
            run = MlflowTracker.start(tracking.uri, tracking.experiment, f"{grid_plan.name}/{point.name}",
                                      parent_run_id=parent.run_id,
                                      tags={"sweep.name": grid_plan.name, "sweep.point": point.name})
            run.log_params({**point.values, "env.name": point.env, "algorithm.preset": point.method,
                            "workspace": str(point.workspace)})
            points[point.name] = run
    jobs = [job for point in grid_plan.points
            for job in point_jobs(point, points[point.name].run_id if point.name in points else None)]
    try:
        results = run_graph(sorted(jobs, key=lambda j: j.stage.startswith("evaluate@")), slots, tracking, use_ray)
        timings = {p.name: sum(r["seconds"] for r in results if r["label"].startswith(f"{p.name}/"))
                   for p in grid_plan.points}
        metrics = summarize(grid_plan, timings)
    except BaseException:
        for run in [*points.values(), parent]:
            if run is not None:
                run.close("FAILED")
        raise
    if parent is not None:
        for point in grid_plan.points:
            prefix = f"sweep/{point.name}/"
            points[point.name].log_metrics(0, {f"sweep/{k[len(prefix):]}": v for k, v in metrics.items()
                                               if k.startswith(prefix)})
            points[point.name].close()
        parent.log_metrics(0, metrics)
        for file in ("summary.md", "summary.csv", "bars.png"):
            parent.log_artifact(grid_plan.report_dir / file, "sweep")
        parent.close()
    logger.info("summary: %s", grid_plan.report_dir / "summary.md")
    return {"name": grid_plan.name, "report_dir": str(grid_plan.report_dir), "stages": results, "metrics": metrics}
