"""The committed lineage describes the committed code (issue 24): dvc.lock's hashes of
the code and params every stage depends on match this checkout, and reports/report.md
was made from dvc.lock's entries. Fails after a change to mage_core/ or to a params
section a stage reads until `make run` is re-run and reports/ and dvc.lock are committed
(CONTRIBUTING.md, "Lineage"). Outputs missing from the DVC cache (every fresh clone) do
not count."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def test_dvc_lock_and_the_report_describe_this_checkout() -> None:
    done = subprocess.run([sys.executable, "-m", "mage_core", "lineage", "--project", str(ROOT)], cwd=ROOT,
                          capture_output=True, text=True, check=False, env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "lineage holds" in done.stdout
