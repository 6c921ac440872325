"""infra/prefect.yaml registers with a real Prefect server (the test harness's):
the three deployments, their flows' entrypoints and the nightly ablation schedule."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _prefect(args: list[str], env: dict[str, str]) -> str:
    done = subprocess.run([str(Path(sys.executable).parent / "prefect"), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, f"prefect {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_the_deployments_register_with_the_nightly_schedule(harness: None) -> None:
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL

    env = {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value(), "MAGE_PROJECT_DIR": str(ROOT),
           "PREFECT_CLI_WRAP_LINES": "false"}
    _prefect(["work-pool", "create", "mage-local", "--type", "process"], env)
    _prefect(["--no-prompt", "deploy", "--all", "--prefect-file", "infra/prefect.yaml"], env)

    with get_client(sync_client=True) as client:
        deployments = {d.name: d for d in client.read_deployments()}
        flows = {f.id: f.name for f in client.read_flows()}
    assert set(deployments) == {"reproduce", "evaluate", "ablation-nightly"}
    assert {name: flows[d.flow_id] for name, d in deployments.items()} == {
        "reproduce": "reproduce", "evaluate": "evaluate", "ablation-nightly": "sweep"}
    nightly = deployments["ablation-nightly"]
    assert nightly.parameters == {"project_dir": ".", "grid": "reward_design"}
    assert [(s.schedule.cron, s.schedule.timezone) for s in nightly.schedules] == [("0 2 * * *", "UTC")]
    assert nightly.work_pool_name == "mage-local"
    assert nightly.pull_steps == [{"prefect.deployments.steps.set_working_directory": {"directory": str(ROOT)}}]
    # The parameter schema Prefect read from the flow's signature: what the UI offers.
    assert {"grid", "vary", "profile", "max_concurrent", "ray"} <= set(nightly.parameter_openapi_schema["properties"])
