"""MLflow, behind the project's ``MetricLogger`` protocol: the only mlflow import.

docs/architecture.md, "Stages, DVC, Prefect and MLflow": a flow is a parent run
and every executed stage is a child run, tagged with the DVC stage/experiment, the
config digest, the git commit and the hashes of its outputs. Three choices follow from how the pipeline runs:

- mlflow is imported inside functions, never at module import, so ``mage --help``
  (which must answer in well under a second) never pays for it;
- runs are addressed by explicit id through ``MlflowClient``, not the fluent API,
  whose active-run stack is process-global and would mix up stages that run
  concurrently in one process;
- ``check_tracking_uri`` is a cheap standalone probe, so an unreachable server
  stops a stage before any training starts instead of after hours of it.

A run can also sample the machine (``start_system_metrics``: MLflow's own
``SystemMetricsMonitor``, ``system/*`` metrics) and register a folder it logged
as a version of a registered model (``register_folder``), by the same explicit
run id.
"""

from __future__ import annotations

import logging
import math
import os
import time
from pathlib import Path
from types import TracebackType
from typing import Any, Iterator, Mapping, Sequence, TypeVar

from mage_core.io.procfs import start_ticks
from mage_core.tracking.lineage import git_state
from mage_core.tracking.store import (
    TrackingUnavailable,
    _sqlite_path,
    check_tracking_uri,
    default_artifact_root,
    default_tracking_uri,
    store_client,
)

#: The public names, those of the store (``mage_core.tracking.store``) re-exported.
__all__ = [
    "ENDED_TAG", "EXPERIMENT_KIND_TAG", "HOST_TAG", "MAX_METRICS_PER_BATCH", "MAX_PARAMS_PER_BATCH",
    "MAX_PARAM_VALUE_CHARS", "PARENT_RUN_TAG", "PID_NS_TAG", "PID_START_TAG", "PID_TAG", "SYSTEM_METRICS_INTERVAL_S",
    "SYSTEM_METRICS_PREFIX", "TRAINING_EXPERIMENT_KIND", "MlflowTracker", "SystemMetrics", "TrackingUnavailable",
    "check_tracking_uri", "default_artifact_root", "default_tracking_uri", "end_dead_runs", "owner_tags", "run_tags",
    "saved_view_links", "store_client", "training_runs_url",
]

# MLflow's own limits (mlflow.utils.validation), copied so chunking needs no import.
MAX_PARAM_VALUE_CHARS = 6000
MAX_PARAMS_PER_BATCH = 100
MAX_METRICS_PER_BATCH = 1000
PARENT_RUN_TAG = "mlflow.parentRunId"  # what the UI nests runs by
#: MLflow 3's experiment kind (the UI's experiment-type selector writes this tag; values in
#: its bundle: genai_development, custom_model_development, ...). The pipeline's experiments
#: hold training runs, no traces: "Machine learning". MLflow 3.17's UI itself follows a global
#: GenAI / Machine learning switch (``workflowType``) rather than this tag; see
#: ``training_runs_url``.
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
TRAINING_EXPERIMENT_KIND = "custom_model_development"
_TRUNCATION_MARK = "...[truncated]"
#: Seconds between two samples of the machine (MLflow's default; its environment variable
#: ``MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL`` overrides it).
SYSTEM_METRICS_INTERVAL_S = 10.0
SYSTEM_METRICS_PREFIX = "system/"

_T = TypeVar("_T")


def _quiet_mlflow_env() -> None:
    # Defaults only: a user's explicit setting wins.
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    # A dead server fails a call in seconds, not after MLflow's ~8 minutes of retries (7 retries,
    # 120 s each): the stages' Outbox retries in the background itself (tracking/outbox.py).
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")


#: Tags that say which process owns a run: a RUNNING run whose process is gone was interrupted
#: (kill -9, a machine that went down) and is marked KILLED by the next run started in the store.
HOST_TAG, PID_TAG, PID_START_TAG, PID_NS_TAG = "mage.host", "mage.pid", "mage.pid_start", "mage.pid_ns"
ENDED_TAG = "mage.ended"


def _pid_namespace() -> str | None:
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return None


def owner_tags() -> dict[str, str]:
    """This process as a run's owner (``HOST_TAG``, ``PID_TAG``, ``PID_START_TAG``)."""
    import socket

    pid = os.getpid()
    tags = {HOST_TAG: socket.gethostname(), PID_TAG: str(pid)}
    namespace = _pid_namespace()
    if namespace is not None:  # containers sharing a hostname do not see each other's pids
        tags[PID_NS_TAG] = namespace
    start = start_ticks(pid)
    if start is not None:
        tags[PID_START_TAG] = start
    return tags


def _owner_alive(tags: Mapping[str, str]) -> bool:
    try:
        pid = int(tags[PID_TAG])
    except (KeyError, ValueError):
        return True  # not ours to judge
    here = _pid_namespace()
    if tags.get(PID_NS_TAG, here) != here:
        return True  # another pid namespace (container): its pids are not ours to look up
    from mage_core.io.lifeline import pid_alive

    if not pid_alive(pid):
        return False
    start = tags.get(PID_START_TAG)
    return start is None or start_ticks(pid) in (None, start)


def end_dead_runs(client: Any) -> list[str]:
    """Mark KILLED every RUNNING run of this host whose owning process is gone (a ``kill -9``
    of a stage or of ``mage reproduce``, a crash): the ids of the runs it ended."""
    import socket

    host = socket.gethostname()
    experiments = [e.experiment_id for e in client.search_experiments()]
    if not experiments:
        return []
    ended = []
    runs = client.search_runs(experiments, filter_string=f"attributes.status = 'RUNNING' and tags.`{HOST_TAG}` = "
                                                         f"'{host}'", max_results=1000)
    for run in runs:
        if not _owner_alive(run.data.tags):
            client.set_tag(run.info.run_id, ENDED_TAG,
                           f"found RUNNING without its process (pid {run.data.tags.get(PID_TAG)}) at "
                           f"{time.strftime('%Y-%m-%d %H:%M:%S')}: interrupted")
            client.set_terminated(run.info.run_id, status="KILLED")
            ended.append(run.info.run_id)
    return ended




def _chunks(items: Sequence[_T], size: int) -> Iterator[Sequence[_T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _param_value(value: Any) -> str:
    # Truncate ourselves: MLflow raises on long values unless MLFLOW_TRUNCATE_LONG_VALUES.
    text = str(value)
    if len(text) <= MAX_PARAM_VALUE_CHARS:
        return text
    return text[: MAX_PARAM_VALUE_CHARS - len(_TRUNCATION_MARK)] + _TRUNCATION_MARK


class SystemMetrics:
    """MLflow's ``SystemMetricsMonitor`` on one run, in a daemon thread of this process:
    CPU, memory, disk and network of the machine (and GPUs where nvidia-ml-py sees
    them) as ``system/*`` metrics, one sample every ``interval_s``.

    ``stop`` ends the thread (it sleeps on an event, so it stops at once, not at the
    next sample) and then logs one last sample covering the time since the previous
    one: MLflow's loop drops a sample still in progress, so a stage shorter than the
    interval would otherwise get no system metrics at all."""

    def __init__(self, tracking_uri: str, run_id: str, interval_s: float = SYSTEM_METRICS_INTERVAL_S) -> None:
        from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

        # No start/stop chatter per stage, nor a warning every sample while the store is away (the
        # stage's Outbox says that once).
        logging.getLogger("mlflow.system_metrics").setLevel(logging.ERROR)
        self._monitor = SystemMetricsMonitor(run_id, sampling_interval=interval_s, tracking_uri=tracking_uri)
        self._monitor.start()

    def stop(self, publish: bool = True) -> None:
        """``publish``: log the last sample (not when the store is known to be away)."""
        monitor, self._monitor = self._monitor, None
        if monitor is None:
            return
        if not publish:
            monitor._shutdown_event.set()  # ends its sampling thread without a last flush to the store
            return
        monitor.finish()  # joins the thread, flushes what it queued
        for part in monitor.monitors:
            part.clear_metrics()
        monitor.collect_metrics()  # CPU load since the previous sample, memory now
        monitor.publish_metrics(monitor.aggregate_metrics())
        monitor.mlflow_logger.flush()


class MlflowTracker:
    """One MLflow run (a flow's parent run or a stage's child run), by explicit id.

    Implements ``MetricLogger`` (log_params / log_metrics / close). As a context
    manager, an exception inside ends the run FAILED (KILLED on Ctrl-C).
    """

    def __init__(self, client: Any, run_id: str, owned: bool = True) -> None:
        self._client = client  # mlflow.tracking.MlflowClient, typed Any to keep mlflow lazy
        self._run_id = run_id
        self._closed = not owned  # a run attached to is ended by its owner, not here
        self._system: SystemMetrics | None = None

    @classmethod
    def attach(cls, tracking_uri: str, run_id: str) -> MlflowTracker:
        """Log into an existing run that someone else (a flow) created and will end."""
        _quiet_mlflow_env()
        from mlflow.exceptions import MlflowException

        client = store_client(tracking_uri)
        try:
            client.get_run(run_id)
        except MlflowException as err:
            raise TrackingUnavailable(f"MLflow run {run_id} does not exist in {tracking_uri}: {err}") from err
        return cls(client, run_id, owned=False)

    @classmethod
    def start(
        cls,
        tracking_uri: str,
        experiment_name: str,
        run_name: str,
        parent_run_id: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> MlflowTracker:
        """Create a run (under ``parent_run_id`` if given) in ``experiment_name``.

        The experiment is created if missing; with a sqlite store its artifact root
        is ``mlartifacts/`` next to the database (see ``default_artifact_root``);
        a server chooses its own. It is tagged as an experiment of training runs
        (``EXPERIMENT_KIND_TAG``), also when it exists without the tag; a kind set
        by hand is left alone.
        """
        _quiet_mlflow_env()
        from mlflow.exceptions import MlflowException

        client = store_client(tracking_uri)
        experiment = client.get_experiment_by_name(experiment_name)
        if experiment is None:
            db = _sqlite_path(tracking_uri) if tracking_uri.lower().startswith("sqlite") else None
            location = default_artifact_root(db.parent) if db is not None else None
            try:
                experiment_id = client.create_experiment(experiment_name, artifact_location=location,
                                                         tags={EXPERIMENT_KIND_TAG: TRAINING_EXPERIMENT_KIND})
            except MlflowException:  # another process created it first
                experiment = client.get_experiment_by_name(experiment_name)
                if experiment is None:
                    raise
                experiment_id = experiment.experiment_id
        elif experiment.lifecycle_stage == "deleted":
            raise TrackingUnavailable(
                f"MLflow experiment {experiment_name!r} is deleted: restore it with "
                f"`mlflow experiments restore --experiment-id {experiment.experiment_id}` or choose another name"
            )
        else:
            experiment_id = experiment.experiment_id
            if EXPERIMENT_KIND_TAG not in experiment.tags:  # made before the tag, or by hand
                client.set_experiment_tag(experiment_id, EXPERIMENT_KIND_TAG, TRAINING_EXPERIMENT_KIND)
        try:
            end_dead_runs(client)  # runs whose process was killed stay RUNNING otherwise
        except Exception as err:  # noqa: BLE001  (a clean-up of others' runs never stops this one)
            logging.getLogger(__name__).warning("MLflow: could not check for interrupted runs (%s)",
                                                " ".join(str(err).split())[:200])
        all_tags = {**owner_tags(), **{k: str(v) for k, v in (tags or {}).items()}}
        if parent_run_id is not None:
            all_tags[PARENT_RUN_TAG] = parent_run_id
        run = client.create_run(experiment_id, tags=all_tags, run_name=run_name)
        return cls(client, run.info.run_id)

    @classmethod
    def reopen(cls, tracking_uri: str, run_id: str) -> MlflowTracker:
        """Continue an interrupted run (a resumed training): RUNNING again, owned by this
        process, ended by it."""
        _quiet_mlflow_env()
        client = store_client(tracking_uri)
        for key, value in owner_tags().items():  # owned first: a concurrent start must not judge it dead
            client.set_tag(run_id, key, value)
        client.update_run(run_id, status="RUNNING")
        return cls(client, run_id)

    @property
    def run_id(self) -> str:
        return self._run_id

    @property
    def tracking_uri(self) -> str:
        return str(self._client.tracking_uri)

    @property
    def client(self) -> Any:
        """The ``MlflowClient`` the run is logged through."""
        return self._client

    @property
    def experiment_id(self) -> str:
        return str(self._client.get_run(self._run_id).info.experiment_id)

    def start_system_metrics(self, interval_s: float = SYSTEM_METRICS_INTERVAL_S) -> None:
        """Sample the machine into this run until ``close`` (``SystemMetrics``)."""
        if self._system is None:
            self._system = SystemMetrics(self.tracking_uri, self._run_id, interval_s)

    def tags(self) -> dict[str, str]:
        """The run's tags as stored."""
        return dict(self._client.get_run(self._run_id).data.tags)

    def rename(self, name: str) -> None:
        self._client.update_run(self._run_id, name=name)

    def register_folder(self, folder: str | Path, model_name: str, artifact_path: str,
                        tags: Mapping[str, str], description: str | None = None) -> str:
        """Log ``folder`` as the run's artifact ``artifact_path`` and register it as a new
        version of ``model_name`` (created if missing), tagged ``tags``; its version.

        The version's source is the copy in the run's artifacts, not ``folder``: a later
        training run that overwrites ``folder`` leaves the registered weights alone. Only
        the artifacts and the registry are touched (no MLflow model flavour, no
        ``mlflow.models`` import)."""
        from mlflow.exceptions import MlflowException
        from mlflow.protos.databricks_pb2 import RESOURCE_ALREADY_EXISTS, ErrorCode

        self.log_artifacts(folder, artifact_path)
        try:
            self._client.create_registered_model(model_name, description=description)
        except MlflowException as err:  # registered by an earlier run (or a stage beside this one)
            if err.error_code != ErrorCode.Name(RESOURCE_ALREADY_EXISTS):
                raise
        source = f"{self._client.get_run(self._run_id).info.artifact_uri.rstrip('/')}/{artifact_path}"
        version = self._client.create_model_version(model_name, source, run_id=self._run_id,
                                                    tags={k: str(v) for k, v in tags.items()}, await_creation_for=0)
        return str(version.version)

    def find_model_version(self, model_name: str, tag: str, value: str) -> str | None:
        """The newest version of ``model_name`` whose tag ``tag`` is ``value`` (None: none)."""
        found = self._client.search_model_versions(f"name = '{model_name}' AND tags.`{tag}` = '{value}'")
        return str(max(int(v.version) for v in found)) if found else None

    def tag_model_versions(self, tags: Mapping[str, str]) -> list[str]:
        """Set ``tags`` on every registered model version made from this run (the flow
        adds the hashes DVC recorded once the stage is done); ``name/version`` of each."""
        done = []
        for version in self._client.search_model_versions(f"run_id = '{self._run_id}'"):
            for key, value in tags.items():
                self._client.set_model_version_tag(version.name, version.version, key, str(value))
            done.append(f"{version.name}/{version.version}")
        return done

    def log_params(self, params: Mapping[str, Any]) -> None:
        """Log already-flattened dotted keys (``train.learning_rate``) as strings.

        MLflow params are write-once: logging a key again with another value raises.
        """
        from mlflow.entities import Param

        items = [Param(str(k), _param_value(v)) for k, v in params.items()]
        for chunk in _chunks(items, MAX_PARAMS_PER_BATCH):
            self._client.log_batch(self._run_id, params=list(chunk))

    def log_metrics(self, step: int, metrics: Mapping[str, float]) -> None:
        """Log ``<phase>/<group>/<name>`` metrics at ``step``; non-finite values are skipped.

        Skipped, not stored: MLflow would keep NaN/inf, but they break its charts
        and the JSONL log writes them as null, so the two sinks stay comparable.
        """
        from mlflow.entities import Metric

        timestamp_ms = int(time.time() * 1000)
        items = [
            Metric(str(k), float(v), timestamp_ms, int(step))
            for k, v in metrics.items()
            if math.isfinite(float(v))
        ]
        for chunk in _chunks(items, MAX_METRICS_PER_BATCH):
            self._client.log_batch(self._run_id, metrics=list(chunk))

    def set_tags(self, tags: Mapping[str, str]) -> None:
        from mlflow.entities import RunTag

        items = [RunTag(str(k), str(v)) for k, v in tags.items()]
        for chunk in _chunks(items, MAX_PARAMS_PER_BATCH):
            self._client.log_batch(self._run_id, tags=list(chunk))

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        self._client.log_artifact(self._run_id, str(path), artifact_path)

    def log_artifacts(self, directory: str | Path, artifact_path: str | None = None) -> None:
        self._client.log_artifacts(self._run_id, str(directory), artifact_path)

    def stop_system_metrics(self, publish: bool = True) -> None:
        if self._system is not None:
            self._system.stop(publish)
            self._system = None

    def close(self, status: str = "FINISHED") -> None:
        """End the run with ``status`` (FINISHED, FAILED, KILLED); a second call is a no-op.
        The system metrics sampler, if any, stops first (also for a run attached to)."""
        self.stop_system_metrics()
        if self._closed:
            return
        self._closed = True
        self._client.set_terminated(self._run_id, status=status)

    def __enter__(self) -> MlflowTracker:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            self.close("FINISHED")
        else:
            self.close("KILLED" if issubclass(exc_type, KeyboardInterrupt) else "FAILED")


def training_runs_url(tracking_uri: str, experiment_name: str, host: str, port: int) -> str:
    """The UI page of ``experiment_name``'s runs in "Machine learning" mode.

    MLflow 3.17's UI opens in "GenAI apps & agents" mode: a global switch
    (``workflowType``, kept in the browser's local storage, default ``genai``) that
    decides what an experiment page shows, traces or runs, whatever the experiment's
    kind tag; the ``workflowType`` query parameter overrides it (read from the UI's
    bundle, mlflow/server/js/build; no server option sets it). The experiment is
    looked up in a database store only (a remote server could keep ``mage ui``
    waiting on its retries); without it, the list of experiments in that mode."""
    base = f"http://{host}:{port}/#"
    query = "?workflowType=machine_learning"
    experiment = _local_experiment(tracking_uri, experiment_name)
    if experiment is None:
        return f"{base}/experiments{query}"
    return f"{base}/experiments/{experiment.experiment_id}/runs{query}"


def _local_experiment(tracking_uri: str, experiment_name: str) -> Any:
    """The experiment from a database store, None if absent or unreadable; a remote
    server is never asked (it could keep ``mage ui`` waiting on its retries)."""
    if tracking_uri.split(":", 1)[0].lower() in ("http", "https", "databricks"):
        return None
    _quiet_mlflow_env()
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    try:
        return MlflowClient(tracking_uri=tracking_uri).get_experiment_by_name(experiment_name)
    except (MlflowException, OSError):
        return None


def saved_view_links(tracking_uri: str, experiment_name: str, host: str, port: int) -> list[tuple[str, str, str]]:
    """(name, runs-table URL, chart URL) of each saved view of ``experiment_name``
    (``mage_core.tracking.views``: "Table 1: <environment> by method" first); empty for a
    remote server (as ``training_runs_url``) or an experiment without views."""
    from mage_core.tracking.views import saved_views, view_url

    experiment = _local_experiment(tracking_uri, experiment_name)
    if experiment is None:
        return []
    base = f"http://{host}:{port}"
    return [(name, view_url(base, experiment.experiment_id, vid), view_url(base, experiment.experiment_id, vid, True))
            for vid, name in saved_views(experiment.tags)]


def lock_entry(text: str, stage: str) -> dict:
    """dvc.lock's entry of ``stage`` (empty when it has none), parsed alone.

    Every stage reads its own entry when it starts, and a lock of 110 stages is about 2 MB of
    YAML: parsing all of it took 4 s a stage. DVC writes each stage as a key indented by two
    spaces under ``stages:``, so the entry's lines run from that key to the next line indented
    by two spaces or fewer; only those are parsed. A key this does not find (a stage not run
    yet, or written in a quoting this does not expect) falls back to parsing the whole file.
    """
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    keys = {f"  {stage}:", f"  '{stage}':", f'  "{stage}":'}
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.rstrip() in keys), None)
    if start is None:
        data = yaml.load(text, Loader=loader) or {}
        stages = data.get("stages") if isinstance(data, dict) else None
        entry = stages.get(stage) if isinstance(stages, dict) else None
        return entry if isinstance(entry, dict) else {}
    end = next((i for i in range(start + 1, len(lines))
                if lines[i].strip() and len(lines[i]) - len(lines[i].lstrip(" ")) <= 2), len(lines))
    parsed = yaml.load("".join(lines[start:end]), Loader=loader) or {}
    entry = next(iter(parsed.values()), None) if isinstance(parsed, dict) else None
    return entry if isinstance(entry, dict) else {}


def run_tags(project_dir: Path, config_digest: str | None, dvc_stage: str | None) -> dict[str, str]:
    """The lineage tags every run carries (docs/commands.md, "MLflow: every stage execution
    is a run"): code, config, data, experiment.

    ``git.dirty`` follows ``git describe --dirty``: modified tracked files count,
    untracked ones do not. ``dvc.out.<path>`` and ``dvc.dep.<path>`` come from dvc.lock:
    the hashes of the outputs and inputs (data, code) DVC last recorded for
    ``dvc_stage``. Tags whose value is unknown
    (no digest, no stage) are left out rather than written as "None".
    """
    project_dir = Path(project_dir)
    git = git_state(project_dir)
    tags = {"git.commit": git.commit or "unknown",
            "git.dirty": "unknown" if git.dirty is None else str(git.dirty).lower()}
    if config_digest is not None:
        tags["mage.config_digest"] = config_digest
    if dvc_stage is not None:
        tags["dvc.stage"] = dvc_stage
        lock = project_dir / "dvc.lock"
        if lock.exists():
            entry = lock_entry(lock.read_text(encoding="utf-8"), dvc_stage)
            for kind, items in (("out", entry.get("outs")), ("dep", entry.get("deps"))):
                for item in items or []:
                    if "path" in item and "md5" in item:
                        tags[f"dvc.{kind}.{item['path']}"] = str(item["md5"])
    exp = os.environ.get("DVC_EXP_NAME")
    if exp:
        tags["dvc.experiment"] = exp
    return tags
