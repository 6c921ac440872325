"""Fixtures shared by the flow tests: one real Prefect server for the whole session of each
process that runs tests (its test harness takes 8-10 s to enter: docs/stack.md, "Prefect"). Under xdist that
is one server per worker that runs a flow test: its own sqlite database in a temporary folder,
a port the OS hands out, and its own PREFECT_HOME (tests/conftest.py)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Callable, Iterator

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def harness() -> Iterator[None]:
    """Prefect's test harness: a temporary server and database, torn down at the end."""
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
    os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
    os.environ["DVC_NO_ANALYTICS"] = "1"
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=90):
        yield


def _copy_project(tmp: Path) -> Path:
    """A copy of the project's pipeline files under ``tmp``, as a fresh clone would have them."""
    project = tmp / "project"
    project.mkdir()
    for name in ("params.yaml", "dvc.yaml", "dvc.runs.yaml", ".dvcignore"):
        shutil.copy2(ROOT / name, project / name)
    shutil.copytree(ROOT / "mage_core", project / "mage_core", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "reports" / "profiles", project / "reports" / "profiles")  # the ablations stage's dep
    return project


@pytest.fixture(scope="session")
def copy_project() -> Callable[[Path], Path]:
    return _copy_project


@pytest.fixture(scope="session")
def alfworld_games(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One generated ALFWorld game of each task type in train/, and the same games copied
    into valid_seen/ and valid_unseen/ (tests of playing, not of the splits' floor plans;
    ~20 s: each game is checked by alfworld's expert)."""
    pytest.importorskip("alfworld", reason="the alfworld extra (make setup installs it)")
    from mage_core.envs.alfworld.dataset import generate_dataset

    root = tmp_path_factory.mktemp("alfworld") / "games"
    generate_dataset(str(root), seed=0, games_per_task={"train": 1})
    for folder in ("valid_seen", "valid_unseen"):
        shutil.copytree(root / "train", root / folder)
    return root
