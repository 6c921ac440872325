"""The MLflow store a run goes to: its URI, its artifact root, a probe and a client.

``default_tracking_uri`` is ``$MLFLOW_TRACKING_URI`` or the project's embedded sqlite
store; ``check_tracking_uri`` is the cheap standalone probe (stdlib only) that stops a
stage before any work when the store cannot take a run; ``store_client`` opens a client
on a store that is ready. Split out of ``mlflow_tracker``, which re-exports these names.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any


class TrackingUnavailable(RuntimeError):
    """The tracking store cannot be reached or written; raised before any work starts."""


def default_tracking_uri(project_dir: Path) -> str:
    """``$MLFLOW_TRACKING_URI`` if set, else an embedded sqlite store in the project.

    sqlite, not a folder store: MLflow 3.17 refuses ``./mlruns`` folder stores
    unless ``MLFLOW_ALLOW_FILE_STORE=true`` (docs/stack.md, "MLflow").
    """
    env = os.environ.get("MLFLOW_TRACKING_URI")
    if env:
        return env
    return f"sqlite:///{(Path(project_dir).resolve() / 'mlflow.db').as_posix()}"


def default_artifact_root(project_dir: Path) -> str:
    """``<project_dir>/mlartifacts`` as a file URI, next to the embedded sqlite store.

    With a sqlite store MLflow otherwise puts artifacts in ./mlruns of whatever
    directory the process happens to run in.
    """
    return (Path(project_dir).resolve() / "mlartifacts").as_uri()


def _sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///...`` URI (None for in-memory databases)."""
    rest = uri.split("://", 1)[1] if "://" in uri else ""
    rest = rest.split("?", 1)[0]
    if not rest.startswith("/") or rest in ("/", "/:memory:"):
        return None
    return Path(rest[1:])  # sqlite:////abs -> /abs ; sqlite:///rel -> rel


_READY: set[str] = set()


def store_client(tracking_uri: str) -> Any:
    """An ``MlflowClient`` on a store that is ready. A new sqlite store is created
    (tables, migrations, in the client's constructor) under an exclusive file lock,
    so processes that start at the same moment (stages run side by side) do not
    race to create its tables."""
    from mlflow.tracking import MlflowClient

    db = _sqlite_path(tracking_uri) if tracking_uri.lower().startswith("sqlite") else None
    if db is None or tracking_uri in _READY:
        return MlflowClient(tracking_uri=tracking_uri)
    import fcntl

    db.parent.mkdir(parents=True, exist_ok=True)
    with open(db.with_name(db.name + ".init-lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        client = MlflowClient(tracking_uri=tracking_uri)
        client.search_experiments(max_results=1)
    _READY.add(tracking_uri)
    return client


def check_tracking_uri(uri: str, timeout_s: float = 5.0) -> None:
    """Fail fast, with the fix in the message, if ``uri`` cannot take a run.

    http(s): one GET of the server's ``/health`` endpoint (stdlib only, no mlflow
    import). sqlite: the database folder must exist or be creatable, and be
    writable. Other schemes (file:, databricks, ...) are left to MLflow.
    """
    fix = (
        "start it with `mlflow server --backend-store-uri sqlite:///mlflow.db --workers 1` "
        "or unset MLFLOW_TRACKING_URI to use the embedded sqlite store"
    )
    scheme = uri.split(":", 1)[0].lower()
    if scheme in ("http", "https"):
        url = uri.rstrip("/") + "/health"
        try:
            with urllib.request.urlopen(url, timeout=timeout_s) as response:
                response.read(64)
        except urllib.error.HTTPError as err:
            if err.code >= 500 or err.code == 404:  # broken, or not an MLflow server
                raise TrackingUnavailable(
                    f"MLflow tracking server at {uri} answered {url} with HTTP {err.code}: {fix}"
                ) from err
        except (urllib.error.URLError, OSError) as err:  # refused, DNS, timeout
            reason = getattr(err, "reason", err)
            raise TrackingUnavailable(f"MLflow tracking server at {uri} is unreachable ({reason}): {fix}") from err
    elif scheme.startswith("sqlite"):
        db = _sqlite_path(uri)
        if db is None:
            return
        folder = db.parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise TrackingUnavailable(f"MLflow store {uri}: cannot create {folder} ({err})") from err
        if not os.access(folder, os.W_OK) or (db.exists() and not os.access(db, os.W_OK)):
            raise TrackingUnavailable(
                f"MLflow store {uri}: {db} is not writable; fix the permissions or set "
                "MLFLOW_TRACKING_URI to a writable store"
            )
