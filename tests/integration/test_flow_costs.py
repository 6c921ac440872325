"""reports/cost.csv when a flow fails: the stages that finished keep the seconds they took (a
real DVC project in a temporary git repository, run by the real reproduce flow)."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.integration


def test_a_failed_flow_keeps_the_costs_of_the_stages_that_finished(tmp_path: Path, harness: None,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from flows.reproduce import reproduce

    project = tmp_path / "project"
    project.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    subprocess.run([sys.executable, "-m", "dvc", "init", "-q"], cwd=project, check=True)
    (project / "params.yaml").write_text(yaml.safe_dump({"tracking": {"mlflow": False}}))
    stages = {"ok": {"cmd": "echo made > made.txt", "outs": ["made.txt"]},
              "fails": {"cmd": "exit 3", "deps": ["made.txt"]}}
    (project / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}))
    monkeypatch.chdir(project)
    with pytest.raises(RuntimeError, match="1 stage\\(s\\) failed or could not run: fails"):
        reproduce(str(project))
    with (project / "reports" / "cost.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["stage"], r["section"]) for r in rows] == [("ok", "ok")]
    assert float(rows[0]["seconds"]) > 0
    assert "1 stage(s) of the graph have no figure yet" in (project / "reports" / "cost.md").read_text()
