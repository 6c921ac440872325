"""``reproduce`` and ``evaluate``: a project's DVC stage graph as one Prefect flow.

Each DVC stage is its own task run (named after the stage). A stage starts once
the stages it depends on are done, and independent stages (the training runs)
run side by side, at most ``reproduce.max_concurrent`` at once. A stage DVC
reports up to date is skipped, so a flow re-run after a crash resumes from the
finished stages and a second run does nothing; Prefect caches nothing itself,
so its caching never fights DVC's. Every executed stage is an MLflow child run
of the flow's run: the flow creates it, the stage's command logs into it
(``MAGE_MLFLOW_RUN_ID``), and once DVC has recorded the stage the flow tags it
with the stage's hashes from dvc.lock.

``evaluate`` is the same over the evaluation stages and the report only: it
re-evaluates the trained checkpoints (say, after a change to the suites)
without training anything.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger

from flows.dvc_stages import missing_outputs, stage_graph
from flows.graph import StageJob, StagesFailed, Tracking, run_graph

REPORT_FILES = ("report.md", "table1.md", "per_opponent.md", "adaptation.png", "training_curves.png",
                "paper-ablations/section.md", "paper-ablations/verdicts.csv", "cost.md", "cost.csv")


def project_settings(project_dir: Path) -> tuple[Tracking | None, int]:
    """Tracking (None when off) and the stage concurrency of ``project_dir``'s params.yaml."""
    from mage_core.config import load_config

    cfg = load_config(project_dir / "params.yaml")
    if not cfg.tracking.mlflow:
        return None, cfg.reproduce.max_concurrent
    from mage_core.tracking.mlflow_tracker import check_tracking_uri, default_tracking_uri

    uri = default_tracking_uri(project_dir)
    check_tracking_uri(uri)  # an unreachable store fails here, before any stage runs
    return Tracking(uri, cfg.tracking.experiment), cfg.reproduce.max_concurrent


def run_project(root: Path, name: str, select: Any = None) -> list[dict[str, Any]]:
    """The stages of ``root``'s graph that ``select`` keeps (all by default), as
    task runs of the current flow under one MLflow run named ``name``."""
    tracking, max_concurrent = project_settings(root)
    full = stage_graph(root)
    graph = {stage: ups for stage, ups in full.items() if select is None or select(stage)}
    parent = None
    if tracking is not None:
        from mage_core.tracking.mlflow_tracker import MlflowTracker, run_tags

        parent = MlflowTracker.start(tracking.uri, tracking.experiment, name,
                                     tags={**run_tags(root, None, None), "stage": name})
    jobs = [StageJob(root, stage, stage, tuple(u for u in ups if u in graph), parent.run_id if parent else None)
            for stage, ups in graph.items()]
    clock = time.perf_counter()
    try:
        results = run_graph(jobs, max_concurrent, tracking)
    except BaseException as err:
        if isinstance(err, StagesFailed):  # the stages that finished keep their figures
            record_costs(root, list(full), err.results, name, time.perf_counter() - clock)
        if parent is not None:
            parent.close("FAILED")
        raise
    record_costs(root, list(full), results, name, time.perf_counter() - clock)
    if parent is not None:
        parent.log_metrics(0, {"flow/stages/executed": sum(not r["skipped"] for r in results),
                               "flow/stages/skipped": sum(r["skipped"] for r in results)})
        for file in REPORT_FILES:
            if (root / "reports" / file).exists():
                parent.log_artifact(root / "reports" / file, str(Path("reports", file).parent))
        parent.close()
    return results


def record_costs(root: Path, stages: list[str], results: list[dict[str, Any]], name: str, seconds: float) -> None:
    """What each section cost (``reports/cost.md``, ``mage_core.stages.cost``); a failure here is
    a warning, never the flow's: a run time is not a result."""
    try:
        from mage_core.stages.cost import sections, update_costs

        update_costs(root, stages, results, name, seconds, sections(root / "params.yaml"))
    except Exception as err:  # noqa: BLE001
        get_run_logger().warning("reports/cost.md not written: %s", err)


@flow(name="reproduce", log_prints=True)
def reproduce(project_dir: str = ".") -> list[dict[str, Any]]:
    """Run every stage of ``project_dir``'s dvc.yaml, dependencies first."""
    return run_project(Path(project_dir).resolve(), "reproduce")


def _evaluation_stage(stage: str) -> bool:
    # the code stage too: its manifests are what tells an evaluation stage that its code changed;
    # the ablations' summary reads the evaluations, as the report does
    return stage.startswith("evaluate@") or stage in ("report", "ablations", "code")


@flow(name="evaluate", log_prints=True)
def evaluate(project_dir: str = ".") -> list[dict[str, Any]]:
    """Run the evaluation stages and the report of ``project_dir``'s dvc.yaml on the
    checkpoints its training stages recorded; nothing is trained."""
    root = Path(project_dir).resolve()
    missing = missing_outputs(root, [stage for stage in stage_graph(root) if not _evaluation_stage(stage)])
    if missing:
        raise RuntimeError(f"evaluate needs the data, warm starts and trained checkpoints; not run yet: {', '.join(missing)} "
                           "(run `mage reproduce` first)")
    return run_project(root, "evaluate", _evaluation_stage)
