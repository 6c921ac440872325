"""Fixtures shared by the flow tests: one real Prefect server for the whole session
(its test harness takes 8-10 s to enter: STACK.md)."""

from __future__ import annotations

import os
from typing import Iterator

import pytest


@pytest.fixture(scope="session")
def harness() -> Iterator[None]:
    """Prefect's test harness: a temporary server and database, torn down at the end."""
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
    os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
    os.environ["DVC_NO_ANALYTICS"] = "1"
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=90):
        yield
