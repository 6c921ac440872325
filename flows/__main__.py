"""``python -m flows reproduce PROJECT_DIR``: run a flow in this process.

``mage reproduce`` starts this as a subprocess, so that nothing inside
``mage_core`` imports Prefect (DESIGN.md) and the flow's start-up costs are
paid only by the command that needs them.
"""

from __future__ import annotations

import argparse
import os


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m flows", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="flow", required=True)
    p = sub.add_parser("reproduce", help="the DVC stage graph of PROJECT_DIR as one flow")
    p.add_argument("project_dir")
    args = parser.parse_args()
    # Ephemeral Prefect: no server to start by hand, quiet, and patient on a slow start (STACK.md).
    for key, value in {"PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "90",
                       "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_LOGGING_TO_API_ENABLED": "false",
                       "PREFECT_SERVER_UI_ENABLED": "false", "DVC_NO_ANALYTICS": "1"}.items():
        os.environ.setdefault(key, value)
    from flows.reproduce import reproduce

    results = reproduce(args.project_dir)
    executed = [r["stage"] for r in results if not r["skipped"]]
    print(f"flow finished: {len(executed)} stage(s) run, {len(results) - len(executed)} up to date")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
