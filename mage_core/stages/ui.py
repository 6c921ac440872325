"""``mage ui``: the MLflow UI on the project's tracking store, on 127.0.0.1.

The store is ``MLFLOW_TRACKING_URI`` if set, else the project's embedded
``mlflow.db`` (sqlite), the one every stage and flow logs to. One worker and no
job execution: ready in seconds (docs/stack.md, "MLflow").

Where it opens: MLflow 3.17's UI starts in its "GenAI apps & agents" mode (a
global switch kept in the browser; its experiment pages then show traces, of
which the pipeline has none). The switch follows the ``workflowType`` query
parameter, so the link printed here opens the experiment's training runs in
"Machine learning" mode (``mlflow_tracker.training_runs_url``). Then come the
experiment's saved views (``mage_core.tracking.views``: "Table 1: <environment> by
method", written by ``mage evaluate``), each as a link to the runs table and to
the charts.

No orphans: ``mlflow ui`` runs its web server as a child process of its own, so
killing ``mage ui`` alone would leave both running. The server is started in a
process group of its own, and Ctrl-C, SIGTERM and SIGHUP stop the whole group
(SIGTERM, then SIGKILL after a grace period), as does any other way out.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

from mage_core.config import ConfigError
from mage_core.io.lifeline import wrap

#: Seconds the server group has to exit after SIGTERM before it gets SIGKILL.
STOP_GRACE_S = 10.0
#: Signals that stop ``mage ui`` and its server.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class _Stop(Exception):
    """Raised in the main thread by a stop signal."""


def command(store: str, host: str, port: int) -> list[str]:
    return [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", store, "--host", host, "--port", str(port),
            "--workers", "1"]


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def stop_group(process: subprocess.Popen, grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM to ``process``'s process group (it leads one: ``start_new_session``),
    so the web server stops with the ``mlflow ui`` process that started it; SIGKILL
    to whatever of the group is left after ``grace_s``."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:  # the whole group is gone
        process.wait()
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if process.poll() is not None and not _group_alive(process.pid):
            return
        time.sleep(0.1)
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def serve(cmd: list[str], cwd: Path, env: dict[str, str]) -> int:
    """Run ``cmd`` in a process group of its own until it exits or a stop signal
    arrives; the group is stopped either way. Exit status: the server's, or 0 when
    stopped by a signal."""
    def on_signal(signum: int, frame: FrameType | None) -> None:
        raise _Stop(signum)

    previous = {sig: signal.signal(sig, on_signal) for sig in STOP_SIGNALS}
    server = None
    try:
        # The server's group stops with this process, also on its kill -9 (io/lifeline.py --group).
        server = subprocess.Popen(wrap(cmd, group=True), cwd=cwd, env=env, start_new_session=True)
        return server.wait()
    except (_Stop, KeyboardInterrupt):
        return 0
    finally:
        for sig in STOP_SIGNALS:  # a second signal no longer interrupts the clean-up
            signal.signal(sig, signal.SIG_IGN)
        if server is not None:
            stop_group(server)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run(params: str, host: str = "127.0.0.1", port: int = 5000) -> int:
    from rich.console import Console

    from mage_core.config import load_config
    from mage_core.tracking.mlflow_tracker import default_tracking_uri, saved_view_links, training_runs_url

    if not 0 < port < 65536:
        raise ConfigError("command line", [f"--port {port}: not a TCP port (1-65535)"])
    project = Path(params).resolve().parent
    store = default_tracking_uri(project)
    if store.startswith("sqlite:///") and not Path(store.removeprefix("sqlite:///")).is_file():
        raise ConfigError("command line", [f"{store}: no runs recorded yet in {project} (run a stage or "
                                           "`mage reproduce --profile smoke` first, or set MLFLOW_TRACKING_URI)"])
    experiment = load_config(params).tracking.experiment
    console = Console(soft_wrap=True)
    console.print(f"MLflow UI for {store} at http://{host}:{port} (Ctrl-C stops it)")
    console.print(f"training runs of experiment {experiment!r}: {training_runs_url(store, experiment, host, port)}")
    views = saved_view_links(store, experiment, host, port)
    if views:
        console.print("saved views (the runs grouped by method; the second link opens the charts):")
    for name, table, charts in views:
        console.print(f"  {name}: {table}\n    charts: {charts}")
    if host not in ("127.0.0.1", "localhost"):
        console.print(f"[yellow]warning:[/] listening on {host}: anyone who can reach this machine sees the runs")
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", "MLFLOW_DISABLE_TELEMETRY": "true"}
    return serve(command(store, host, port), project, env)
