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


@pytest.fixture(scope="module")
def one_thread():
    """One torch thread for the module (request with ``pytest.mark.usefixtures``):
    exact comparisons of float sums do not depend on the thread count."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
