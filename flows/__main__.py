"""``python -m flows {reproduce,evaluate,sweep} PROJECT_DIR``: run a flow in this process.

``mage reproduce`` and ``mage sweep`` start this as a subprocess, so that nothing
inside ``mage_core`` imports Prefect (docs/architecture.md) and the flow's start-up costs
are paid only by the command that needs them.

Without ``PREFECT_API_URL`` Prefect runs the flow against a temporary local
server that it starts on first use; here that server is started at once, in
the background, while this process imports MLflow and DVC and reads the stage
graph, so the two start-ups overlap; and the process ends as soon as its exit
handlers have run (``os._exit``), without the seconds Python spends tearing
down the modules of Prefect, MLflow and DVC.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from typing import Callable
from pathlib import Path


def _start_prefect_server() -> Callable[[], None] | None:
    """Start the temporary Prefect API server now and point ``PREFECT_API_URL`` at
    it; returns a function that waits until it answers. None when a server is
    configured (``PREFECT_API_URL`` in the environment or the Prefect profile).

    This is what Prefect does on first use without ``PREFECT_API_URL``
    (``SubprocessASGIServer``: the same uvicorn command, settings and
    environment), started before this process spends seconds importing MLflow,
    DVC and Prefect's flow engine instead of after; the server's own start-up
    runs meanwhile on another core. It is stopped when this process exits.
    """
    import atexit
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    import prefect
    from prefect.settings import get_current_settings

    settings = get_current_settings()
    if settings.api.url:  # from the environment or the active Prefect profile
        return None
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    from mage_core.io.lifeline import wrap

    server = subprocess.Popen(  # dies with this process, also on its kill -9 (lifeline)
        wrap([sys.executable, "-m", "uvicorn", "--app-dir", str(prefect.__module_path__.parent), "--factory",
              "prefect.server.api.server:create_app", "--host", "127.0.0.1", "--port", str(port), "--log-level",
              "error", "--lifespan", "on"]),
        env={**os.environ, "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1",
             **settings.to_environment_variables(exclude_unset=True)})

    def stop() -> None:
        server.terminate()
        try:
            server.wait(timeout=5)
        except subprocess.TimeoutExpired:
            server.kill()

    atexit.register(stop)
    api = f"http://127.0.0.1:{port}/api"
    os.environ["PREFECT_API_URL"] = api  # for subprocesses; this one's settings are already loaded

    def wait() -> None:
        deadline = time.monotonic() + float(os.environ["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"])
        while time.monotonic() < deadline:
            if server.poll() is not None:
                raise RuntimeError(f"the temporary Prefect server exited with code {server.returncode} "
                                   "(is PREFECT_HOME writable? see docs/stack.md, Prefect)")
            try:
                with urllib.request.urlopen(f"{api}/health", timeout=1) as response:
                    if response.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"the temporary Prefect server did not answer at {api} in time")

    return wait


def _warm_up(project_dir: str) -> None:
    """What every flow does first (tracking store, DVC graph), done while the server boots."""
    from flows.dvc_stages import stage_graph
    from flows.reproduce import project_settings

    tracking, _ = project_settings(Path(project_dir).resolve())
    if tracking is not None:
        from mage_core.tracking.mlflow_tracker import store_client

        store_client(tracking.uri)  # imports MLflow, creates or migrates the store
    stage_graph(Path(project_dir))


def main() -> int:
    import signal

    from mage_core.io.lifeline import from_environment

    # Dies with `mage reproduce` / `mage sweep`, even on their kill -9. SIGKILL, not SIGTERM: Prefect
    # catches SIGTERM and waits for the running stages; the stages' own `dvc repro` and commands
    # then die with this process (io/lifeline.py), and the next run marks their MLflow runs KILLED.
    from_environment(signal.SIGKILL)
    parser = argparse.ArgumentParser(prog="python -m flows", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="flow", required=True)
    for flow_name, text in (("reproduce", "every stage of PROJECT_DIR's dvc.yaml"),
                            ("evaluate", "the evaluation stages and the report of PROJECT_DIR's dvc.yaml")):
        sub.add_parser(flow_name, help=text).add_argument("project_dir")
    p = sub.add_parser("sweep", help="an ablation grid over PROJECT_DIR's params.yaml (see `mage sweep --help`)")
    p.add_argument("project_dir")
    p.add_argument("--grid")
    p.add_argument("--vary", action="append", default=[])
    p.add_argument("--set", action="append", default=[], dest="overrides")
    p.add_argument("--name")
    p.add_argument("--profile")
    p.add_argument("--max-concurrent", type=int)
    p.add_argument("--ray", action="store_true")
    args = parser.parse_args()
    # Quiet, patient on a slow start, and no UI to build (docs/stack.md, "Prefect").
    for key, value in {"PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "90",
                       "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_LOGGING_TO_API_ENABLED": "false",
                       "PREFECT_SERVER_UI_ENABLED": "false", "DVC_NO_ANALYTICS": "1",
                       "MLFLOW_DISABLE_TELEMETRY": "true", "RAY_USAGE_STATS_ENABLED": "0"}.items():
        os.environ.setdefault(key, value)
    server = _start_prefect_server()
    if args.flow != "sweep":
        _warm_up(args.project_dir)
    settings: contextlib.AbstractContextManager[object] = contextlib.nullcontext()
    if server is not None:
        server()
        from prefect.settings import PREFECT_API_URL, temporary_settings

        settings = temporary_settings(updates={PREFECT_API_URL: os.environ["PREFECT_API_URL"]})
    with settings:
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    if args.flow == "sweep":
        from flows.sweep import start_ray, sweep

        if args.ray or os.environ.get("RAY_ADDRESS"):
            import sys

            from mage_core.backends.ray_local import RayStartError

            try:
                start_ray(args.project_dir, args.grid, args.vary, args.name, args.profile, args.overrides,
                          args.max_concurrent)
            except RayStartError as err:
                print(f"Ray did not start: {err}", file=sys.stderr)
                return 1
        result = sweep(args.project_dir, grid=args.grid, vary=args.vary, name=args.name, profile=args.profile,
                       overrides=args.overrides, max_concurrent=args.max_concurrent, ray=args.ray)
        print(f"sweep {result['name']} finished: summary in {result['report_dir']}")
        return 0
    from flows import reproduce as flows_reproduce

    results = getattr(flows_reproduce, args.flow)(args.project_dir)
    executed = [r["stage"] for r in results if not r["skipped"]]
    print(f"flow finished: {len(executed)} stage(s) run, {len(results) - len(executed)} up to date")
    return 0


if __name__ == "__main__":
    code = main()
    import atexit
    import sys

    atexit._run_exitfuncs()  # Prefect drains its log and event workers; the server stops
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
