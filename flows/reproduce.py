"""``reproduce``: the paper reproduction as one Prefect flow over the DVC stage graph.

Each DVC stage is its own task run (named after the stage), in DVC's order.
A stage DVC reports up to date is skipped (so a flow re-run after a crash
resumes from the finished stages, and a second run does nothing); Prefect
caches nothing itself, so its caching never fights DVC's. Every executed stage
is an MLflow child run of the flow's run: the flow creates it, the stage's
command logs into it (``MAGE_MLFLOW_RUN_ID``), and once DVC has recorded the
stage the flow tags it with the stage's hashes from dvc.lock.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from flows.dvc_stages import is_up_to_date, repro, stage_order

#: Stage retries: a crashed stage is run again (training resumes from its checkpoint).
STAGE_RETRIES = 1


def _tracking(project_dir: Path) -> tuple[bool, str]:
    from mage_core.config import load_config

    cfg = load_config(project_dir / "params.yaml")
    return cfg.tracking.mlflow, cfg.tracking.experiment


@task(retries=STAGE_RETRIES, retry_delay_seconds=1, cache_policy=NO_CACHE, task_run_name="{stage}")
def run_stage(project_dir: Path, stage: str, parent_run_id: str | None, experiment: str) -> dict[str, Any]:
    """One DVC stage: skipped when up to date, else run under its own MLflow child run."""
    logger = get_run_logger()
    if is_up_to_date(project_dir, stage):
        logger.info("%s is up to date (DVC): skipped", stage)
        return {"stage": stage, "skipped": True, "seconds": 0.0}
    child = None
    extra_env: dict[str, str] = {}
    if parent_run_id is not None:
        from mage_core.tracking.mlflow_tracker import MlflowTracker, default_tracking_uri
        from mage_core.tracking.runs import RUN_ID_ENV

        child = MlflowTracker.start(default_tracking_uri(project_dir), experiment, stage, parent_run_id=parent_run_id)
        extra_env[RUN_ID_ENV] = child.run_id
    started = time.perf_counter()
    try:
        repro(project_dir, stage, extra_env)
    except BaseException:
        if child is not None:
            child.close("FAILED")
        raise
    seconds = time.perf_counter() - started
    if child is not None:
        from mage_core.tracking.mlflow_tracker import run_tags

        child.set_tags(run_tags(project_dir, None, stage))  # the hashes DVC just recorded
        child.log_metrics(0, {"flow/stage/seconds": seconds})
        child.close()
    logger.info("%s done in %.1f s", stage, seconds)
    return {"stage": stage, "skipped": False, "seconds": seconds}


@flow(name="reproduce", log_prints=True)
def reproduce(project_dir: str = ".") -> list[dict[str, Any]]:
    """Run every stage of ``project_dir``'s dvc.yaml in DVC's order."""
    root = Path(project_dir).resolve()
    mlflow_on, experiment = _tracking(root)
    parent = None
    if mlflow_on:
        from mage_core.tracking.mlflow_tracker import (
            MlflowTracker,
            check_tracking_uri,
            default_tracking_uri,
            run_tags,
        )

        uri = default_tracking_uri(root)
        check_tracking_uri(uri)
        parent = MlflowTracker.start(uri, experiment, "reproduce", tags=run_tags(root, None, None))
    results: list[dict[str, Any]] = []
    try:
        for stage in stage_order(root):
            results.append(run_stage(root, stage, parent.run_id if parent else None, experiment))
    except BaseException:
        if parent is not None:
            parent.close("FAILED")
        raise
    if parent is not None:
        parent.log_metrics(0, {"flow/stages/executed": sum(not r["skipped"] for r in results),
                               "flow/stages/skipped": sum(r["skipped"] for r in results)})
        for name in ("report.md", "table1.md", "per_opponent.md", "adaptation.png", "training_curves.png"):
            if (root / "reports" / name).exists():
                parent.log_artifact(root / "reports" / name, "reports")
        parent.close()
    return results
