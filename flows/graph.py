"""Running DVC stage graphs as Prefect task runs, several stages at once.

``execute_stage`` is one stage, start to end, as a plain function: skipped when
DVC finds it up to date, else run by ``dvc repro`` under an MLflow child run of
the flow's (or grid point's) run, which is tagged with the hashes DVC recorded.
It runs in a thread of the flow's process or, with Ray, in a Ray worker: the
same function, shipped by reference. The stage's own command names its run and
tags it with what it ran (``mage_core.tracking.runs.StageIdentity``); the flow adds
DVC's hashes to the run and to any model version the stage registered.

``run_graph`` submits one Prefect task run per stage, in dependency order; a
task waits for its upstream tasks, then for one of ``max_concurrent`` slots, so
independent stages (the training runs of the reproduction, the points of a
grid) run side by side and the slots bound how many. A free slot goes to the
ready stage that comes first in that order (``OrderedSlots``), whichever thread
wakes first: the order the graph was given in is the order stages start. Prefect
retries a failed stage once and caches nothing: DVC's records decide what is done.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from flows.dvc_stages import is_up_to_date, repro

#: Stage retries: a crashed stage is run again (training resumes from its checkpoint).
STAGE_RETRIES = 1


@dataclass(frozen=True)
class Tracking:
    """Where stage runs go: an MLflow store and experiment."""

    uri: str
    experiment: str


@dataclass(frozen=True)
class StageJob:
    """One stage of one DVC project, as a node of the graph a flow runs."""

    project_dir: Path
    stage: str
    label: str  # the task run's name: the stage, or "<point>/<stage>" in a sweep
    upstream: tuple[str, ...] = ()  # labels of the jobs it waits for
    parent_run_id: str | None = None  # the MLflow run its own run is a child of
    cpus: float = 1.0  # what a Ray task of the stage asks for (``stage_resources``)
    gpus: float = 0.0


class OrderedSlots:
    """At most ``limit`` stages at once, a free slot given to the ready stage that comes first in
    the jobs' order: ready when every upstream stage finished, whether its task has reached the
    slots yet or not. A plain semaphore gave the slots to whichever thread woke first: once every
    stage waited on the code stage, the order was random and a long training stage could start
    last, with one core idle at the end. A stage that fails is ready again for its retry; after
    its last attempt it and what depends on it are out of the order. A ready stage that has not
    asked for ``patience`` seconds after the last change (a task Prefect never started) holds
    no slot back."""

    def __init__(self, limit: int, jobs: Sequence[StageJob], retries: int = 0, patience: float = 10.0) -> None:
        self._free = limit
        self._rank = {job.label: i for i, job in enumerate(jobs)}
        self._upstream = {job.label: set(job.upstream) for job in jobs}
        self._pending = set(self._rank)  # not started (or to be retried)
        self._finished: set[str] = set()
        self._failures: dict[str, int] = {}
        self._retries, self._patience = retries, patience
        self._waiting: set[str] = set()
        self._changed = time.monotonic()
        self._cond = threading.Condition()

    def _may_start(self, label: str) -> bool:
        """A slot is free for ``label`` when more are free than ready stages ahead of it wait for
        (those that have not asked count only until the patience runs out)."""
        rank = self._rank[label]
        overdue = time.monotonic() - self._changed > self._patience
        ahead = sum(1 for other in self._pending
                    if self._rank[other] < rank and self._upstream[other] <= self._finished
                    and (other in self._waiting or not overdue))
        return self._free > ahead

    @contextmanager
    def held(self, label: str) -> Iterator[None]:
        """A slot for stage ``label`` (one of the jobs), held while the block runs."""
        with self._cond:
            self._waiting.add(label)
            while not self._may_start(label):
                self._cond.wait(timeout=1.0)
            self._waiting.discard(label)
            self._pending.discard(label)
            self._free -= 1
            self._changed = time.monotonic()
        ok = False
        try:
            yield
            ok = True
        finally:
            with self._cond:
                self._free += 1
                if ok:
                    self._finished.add(label)
                else:
                    self._failures[label] = self._failures.get(label, 0) + 1
                    if self._failures[label] <= self._retries:
                        self._pending.add(label)  # its retry comes back here
                self._changed = time.monotonic()
                self._cond.notify_all()


def stage_resources(project_dir: Path, stage: str) -> tuple[float, float]:
    """(CPUs, GPUs) the stage's command occupies: a training stage of ``backend.ranks``
    N launches N processes (one GPU each, or ``train.num_threads`` cores each on a
    CPU); an evaluation of a GPU run takes one GPU; everything else one CPU."""
    kind, _, run = stage.partition("@")
    if kind not in ("train", "evaluate") or not run:
        return 1.0, 0.0
    from mage_core.config import load_config

    cfg = load_config(project_dir / "params.yaml", run=run)
    b = cfg.backend
    if kind == "evaluate":
        return 1.0, float(min(b.gpus, 1))
    if b.gpus:
        return float(b.ranks), float(b.gpus)
    return float(b.ranks * cfg.train.num_threads), 0.0


def execute_stage(project_dir: Path, stage: str, parent_run_id: str | None,
                  tracking: Tracking | None) -> dict[str, Any]:
    """One DVC stage: skipped when up to date, else ``dvc repro`` under its own MLflow run."""
    where = {"stage": stage, "pid": os.getpid(), "host": socket.gethostname()}
    if is_up_to_date(project_dir, stage):
        return {**where, "skipped": True, "seconds": 0.0, "started": time.time(), "ended": time.time()}
    child = None
    extra_env: dict[str, str] = {}
    if tracking is not None:
        from mage_core.tracking.mlflow_tracker import MlflowTracker
        from mage_core.tracking.runs import RUN_ID_ENV

        child = MlflowTracker.start(tracking.uri, tracking.experiment, stage, parent_run_id=parent_run_id,
                                    tags={"stage": stage.partition("@")[0]})  # the stage renames and tags it
        extra_env = {RUN_ID_ENV: child.run_id, "MLFLOW_TRACKING_URI": tracking.uri}
    started, clock = time.time(), time.perf_counter()
    try:
        repro(project_dir, stage, extra_env)
    except BaseException:
        if child is not None:
            child.close("FAILED")
        raise
    seconds = time.perf_counter() - clock
    if child is not None:
        from mage_core.tracking.mlflow_tracker import run_tags

        tags = run_tags(project_dir, None, stage)  # the hashes DVC just recorded
        child.set_tags(tags)
        # ... also on the model version a training stage registered (mage_core.tracking.registry)
        child.tag_model_versions({k: v for k, v in tags.items() if k.startswith(("dvc.out.", "dvc.dep."))})
        child.log_metrics(0, {"flow/stage/seconds": seconds})
        child.close()
    return {**where, "skipped": False, "seconds": seconds, "started": started, "ended": time.time()}


_remote_execute: Any = None


def _on_ray(job: StageJob, tracking: Tracking | None) -> dict[str, Any]:
    """``execute_stage`` as a Ray task asking for the stage's CPUs and GPUs, waited
    for; a stage the cluster can never place fails at once, naming what it lacks."""
    global _remote_execute
    import ray

    have = ray.cluster_resources()
    short = [f"{need:g} {name} (the cluster has {have.get(key, 0.0):g})"
             for need, name, key in ((job.cpus, "CPUs", "CPU"), (job.gpus, "GPUs", "GPU")) if need > have.get(key, 0.0)]
    if short:
        raise RuntimeError(f"{job.label} needs {' and '.join(short)} on one Ray node: lower backend.ranks / "
                           "backend.gpus, or add such a node to the cluster (infra/README.md)")
    if _remote_execute is None:
        _remote_execute = ray.remote(max_retries=0)(execute_stage)  # Prefect retries, not Ray
    task = _remote_execute.options(num_cpus=job.cpus, num_gpus=job.gpus)
    return ray.get(task.remote(job.project_dir, job.stage, job.parent_run_id, tracking))


@task(retries=STAGE_RETRIES, retry_delay_seconds=1, cache_policy=NO_CACHE)
def stage_task(job: StageJob, tracking: Tracking | None, slots: OrderedSlots,
               use_ray: bool) -> dict[str, Any]:
    logger = get_run_logger()
    with slots.held(job.label):
        result = _on_ray(job, tracking) if use_ray else execute_stage(job.project_dir, job.stage,
                                                                        job.parent_run_id, tracking)
    if result["skipped"]:
        logger.info("%s is up to date (DVC): skipped", job.label)
    else:
        logger.info("%s done in %.1f s%s", job.label, result["seconds"],
                    f" (Ray worker {result['pid']} on {result['host']})" if use_ray else "")
    return {**result, "label": job.label}


class StagesFailed(RuntimeError):
    """Some stages of a graph failed; ``results`` holds those of the stages that finished."""

    def __init__(self, message: str, results: list[dict[str, Any]]) -> None:
        super().__init__(message)
        self.results = results


def run_graph(jobs: Sequence[StageJob], max_concurrent: int, tracking: Tracking | None,
              use_ray: bool = False) -> list[dict[str, Any]]:
    """Run ``jobs`` (dependencies first) as task runs of the current flow, at most
    ``max_concurrent`` at once; their results in the same order. Raises once every
    stage that could run has run, naming the ones that failed or could not run."""
    slots = OrderedSlots(max_concurrent, jobs, retries=STAGE_RETRIES)
    futures: dict[str, Any] = {}
    for job in jobs:
        unknown = [u for u in job.upstream if u not in futures]
        if unknown:
            raise ValueError(f"{job.label}: upstream {unknown} not submitted before it (jobs out of order)")
        futures[job.label] = stage_task.with_options(task_run_name=job.label).submit(
            job, tracking, slots, use_ray, wait_for=[futures[u] for u in job.upstream])
    results, failed = [], []
    for label, future in futures.items():
        try:
            results.append(future.result())
        except Exception:  # noqa: BLE001  (the task's own log holds the error)
            failed.append(label)
    if failed:
        raise StagesFailed(f"{len(failed)} stage(s) failed or could not run: {', '.join(failed)}; "
                           "finished stages are kept: run the flow again to resume", results)
    return results


def init_ray(max_concurrent: int) -> str:
    """Connect to ``RAY_ADDRESS``, or start a local Ray instance with ``max_concurrent`` CPUs
    (``mage_core.backends.ray_local``: it listens on 127.0.0.1 only)."""
    import ray

    from mage_core.backends.ray_local import start_local_ray

    address = os.environ.get("RAY_ADDRESS")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if not ray.is_initialized():
        if address:
            ray.init(address=address, log_to_driver=True)
        else:
            start_local_ray(max_concurrent, without_ray="run the sweep without --ray",
                            log_to_driver=True)  # listens on 127.0.0.1 only
    return address or "a local Ray instance"
