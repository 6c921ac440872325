"""Shared fixtures. Tests say their kind with a marker (see pyproject.toml)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture
def project_root() -> Path:
    return ROOT


@pytest.fixture
def mage_cmd() -> list[str]:
    """The CLI as a subprocess command, in this interpreter's environment."""
    return [sys.executable, "-m", "mage_core"]
