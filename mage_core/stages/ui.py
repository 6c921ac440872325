"""``mage ui``: the MLflow UI on the project's tracking store, on 127.0.0.1.

The store is ``MLFLOW_TRACKING_URI`` if set, else the project's embedded
``mlflow.db`` (sqlite), the one every stage and flow logs to. One worker and no
job execution: ready in seconds and no orphan processes after Ctrl-C (STACK.md).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from mage_core.config import ConfigError


def command(store: str, host: str, port: int) -> list[str]:
    return [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", store, "--host", host, "--port", str(port),
            "--workers", "1"]


def run(params: str, host: str = "127.0.0.1", port: int = 5000) -> int:
    from rich.console import Console

    from mage_core.tracking.mlflow_tracker import default_tracking_uri

    if not 0 < port < 65536:
        raise ConfigError("command line", [f"--port {port}: not a TCP port (1-65535)"])
    project = Path(params).resolve().parent
    store = default_tracking_uri(project)
    if store.startswith("sqlite:///") and not Path(store.removeprefix("sqlite:///")).is_file():
        raise ConfigError("command line", [f"{store}: no runs recorded yet in {project} (run a stage or "
                                           "`mage reproduce --profile smoke` first, or set MLFLOW_TRACKING_URI)"])
    console = Console(soft_wrap=True)
    console.print(f"MLflow UI for {store} at http://{host}:{port} (Ctrl-C stops it)")
    if host not in ("127.0.0.1", "localhost"):
        console.print(f"[yellow]warning:[/] listening on {host}: anyone who can reach this machine sees the runs")
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", "MLFLOW_DISABLE_TELEMETRY": "true"}
    try:
        return subprocess.run(command(store, host, port), cwd=project, env=env, check=False).returncode
    except KeyboardInterrupt:
        return 0
