"""A stage's tracking session: the JSONL log plus, when enabled, an MLflow run.

Every stage execution is one MLflow run (docs/architecture.md): run by hand it is a run of
its own; run by a flow it is a child of the flow's run. The flow tells the
stage through the environment:

- ``MAGE_MLFLOW_RUN_ID``: log into this existing run (the flow created it and
  tags it with dvc.lock's hashes once DVC has recorded the stage);
- ``MAGE_MLFLOW_PARENT_RUN_ID``: create the stage's run under this parent.

``MLFLOW_TRACKING_URI`` picks the store (default: ``mlflow.db`` in the project,
sqlite). The store is checked before the stage does any work, so an
unreachable server fails in seconds, not after hours of training.

Every stage run is named and tagged by what it ran (``StageIdentity``): the tags
``stage``, ``env``, ``method``, ``seed`` and ``mage.run`` (the run of
``reproduce.runs`` or the sweep point), so the UI groups and filters runs by them
("Group by" tag ``method``), and a name such as ``evaluate webshop gigpo seed0``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

RUN_ID_ENV = "MAGE_MLFLOW_RUN_ID"
PARENT_RUN_ID_ENV = "MAGE_MLFLOW_PARENT_RUN_ID"


@dataclass(frozen=True)
class StageIdentity:
    """What a stage run ran: its stage (``train``, ``evaluate``, ``report``, ...) and, for a
    run of one configuration, its environment, method (``algorithm.preset``), seed and
    the name of its run in ``reproduce.runs`` (or sweep point), if any."""

    stage: str
    env: str | None = None
    method: str | None = None
    seed: int | None = None
    run: str | None = None

    @classmethod
    def of(cls, stage: str, cfg: Any, run: str | None = None) -> StageIdentity:
        """The identity of ``stage`` run on config ``cfg`` (``mage_core.config.Config``)."""
        return cls(stage, cfg.env.name, cfg.algorithm.preset, cfg.seed, run)

    @property
    def dvc_stage(self) -> str:
        """The DVC stage that runs it (``train@<run>`` in dvc.yaml), or the bare stage."""
        return f"{self.stage}@{self.run}" if self.run else self.stage

    def tags(self) -> dict[str, str]:
        values = {"stage": self.stage, "env": self.env, "method": self.method,
                  "seed": None if self.seed is None else str(self.seed), "mage.run": self.run}
        return {k: v for k, v in values.items() if v is not None}

    def name(self) -> str:
        """``<stage> <env> <method> seed<seed>``, then ``[<run>]`` where the run's name says
        more than that (``<env>-<method>`` or ``<env>-<method>-seed<seed>`` say nothing more;
        a sweep point's name does)."""
        parts = [self.stage, self.env, self.method, None if self.seed is None else f"seed{self.seed}"]
        name = " ".join(p for p in parts if p)
        if self.run and self.run not in (f"{self.env}-{self.method}", f"{self.env}-{self.method}-seed{self.seed}"):
            name += f" [{self.run}]"
        return name


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


def interrupted_run(tracking_uri: str, experiment: str, output_dir: str, config_digest: str) -> str | None:
    """The latest run of ``experiment`` that trained into ``output_dir`` (an absolute path) with ``config_digest``
    and did not finish (KILLED, FAILED, or RUNNING with its process gone): the run a resumed
    training continues, so that its metrics stay in one run."""
    from mage_core.tracking.mlflow_tracker import PID_TAG, _owner_alive, store_client

    client = store_client(tracking_uri)
    found = client.get_experiment_by_name(experiment)
    if found is None:
        return None

    # The digest is hex (safe in a filter); the folder is compared here, as MLflow's filters do not
    # unescape quotes in values.
    runs = client.search_runs([found.experiment_id], filter_string=(
        f"tags.`mage.config_digest` = '{config_digest}' and attributes.status != 'FINISHED'"),
        order_by=["attributes.start_time DESC"], max_results=100)
    for run in runs:
        if run.data.tags.get("mage.output_dir") != output_dir:
            continue
        if run.info.status != "RUNNING" or (PID_TAG in run.data.tags and not _owner_alive(run.data.tags)):
            return str(run.info.run_id)
    return None


def open_mlflow_run(stage: str, experiment: str, config_digest: str | None, project_dir: Path,
                    run_name: str | None = None, identity: StageIdentity | None = None,
                    system_metrics: bool = False, flush_timeout_s: float = 60.0,
                    continue_run: str | None = None) -> Any:
    """The stage's MLflow run: the flow's (``MAGE_MLFLOW_RUN_ID``, renamed after
    ``identity``), a child of ``MAGE_MLFLOW_PARENT_RUN_ID``, ``continue_run`` (an interrupted
    run id, reopened), or a run of its own; tagged with the lineage (``run_tags``) and
    ``identity``'s tags, sampling the machine (``system/*`` metrics) until it is closed with
    ``system_metrics``. Returned inside an ``Outbox``: its metrics, params and tags go to the
    store from a background thread, so a store that goes away never stops the stage. Stages
    call ``check_tracking`` before their work, so the store is not probed again here."""
    from mage_core.tracking.mlflow_tracker import MlflowTracker, default_tracking_uri, run_tags
    from mage_core.tracking.outbox import Outbox

    identity = identity or StageIdentity(stage)
    uri = default_tracking_uri(project_dir)
    tags = {**run_tags(project_dir, config_digest, identity.dvc_stage), **identity.tags()}
    name = run_name or identity.name()
    existing = os.environ.get(RUN_ID_ENV)
    if existing:
        run = MlflowTracker.attach(uri, existing)
        run.set_tags(tags)
        run.rename(name)
    elif continue_run:
        run = MlflowTracker.reopen(uri, continue_run)
        run.set_tags(tags)
    else:
        run = MlflowTracker.start(uri, experiment, name, parent_run_id=os.environ.get(PARENT_RUN_ID_ENV), tags=tags)
    if system_metrics:
        run.start_system_metrics()
    return Outbox(run, flush_timeout_s=flush_timeout_s)
