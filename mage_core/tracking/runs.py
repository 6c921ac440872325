"""A stage's tracking session: the JSONL log plus, when enabled, an MLflow run.

Every stage execution is one MLflow run (DESIGN.md): run by hand it is a run of
its own; run by a flow it is a child of the flow's run. The flow tells the
stage through the environment:

- ``MAGE_MLFLOW_RUN_ID``: log into this existing run (the flow created it and
  tags it with dvc.lock's hashes once DVC has recorded the stage);
- ``MAGE_MLFLOW_PARENT_RUN_ID``: create the stage's run under this parent.

``MLFLOW_TRACKING_URI`` picks the store (default: ``mlflow.db`` in the project,
sqlite). The store is checked before the stage does any work, so an
unreachable server fails in seconds, not after hours of training.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Sequence

RUN_ID_ENV = "MAGE_MLFLOW_RUN_ID"
PARENT_RUN_ID_ENV = "MAGE_MLFLOW_PARENT_RUN_ID"


class StageTracker:
    """Fans ``MetricLogger`` calls out to several sinks; artifacts go to MLflow
    only (the JSONL log has none)."""

    def __init__(self, loggers: Sequence[Any], mlflow_run: Any | None = None) -> None:
        self.loggers = list(loggers)
        self.mlflow_run = mlflow_run

    def log_params(self, params: Mapping[str, Any]) -> None:
        for logger in self.loggers:
            logger.log_params(params)

    def log_metrics(self, step: int, metrics: Mapping[str, float]) -> None:
        for logger in self.loggers:
            logger.log_metrics(step, metrics)

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        if self.mlflow_run is not None and Path(path).exists():
            self.mlflow_run.log_artifact(path, artifact_path)

    def close(self, status: str = "FINISHED") -> None:
        for logger in self.loggers:
            if logger is self.mlflow_run:
                logger.close(status)
            else:
                logger.close()


def check_tracking(project_dir: Path) -> None:
    """Fail fast (``TrackingUnavailable``) if the tracking store cannot take a run."""
    from mage_core.tracking.mlflow_tracker import check_tracking_uri, default_tracking_uri

    check_tracking_uri(default_tracking_uri(project_dir))


def open_mlflow_run(stage: str, experiment: str, config_digest: str | None, project_dir: Path,
                    run_name: str | None = None) -> Any:
    """The stage's MLflow run: the flow's (``MAGE_MLFLOW_RUN_ID``), a child of
    ``MAGE_MLFLOW_PARENT_RUN_ID``, or a run of its own. Stages call
    ``check_tracking`` before their work, so the store is not probed again here."""
    from mage_core.tracking.mlflow_tracker import MlflowTracker, default_tracking_uri, run_tags

    uri = default_tracking_uri(project_dir)
    tags = run_tags(project_dir, config_digest, stage)
    existing = os.environ.get(RUN_ID_ENV)
    if existing:
        run = MlflowTracker.attach(uri, existing)
        run.set_tags(tags)
        return run
    return MlflowTracker.start(uri, experiment, run_name or stage, parent_run_id=os.environ.get(PARENT_RUN_ID_ENV),
                               tags=tags)
