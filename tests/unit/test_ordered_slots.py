"""The flow's slots: a free slot goes to the ready stage that comes first in the graph's order,
whichever thread asks first (flows/graph.py, ``OrderedSlots``). Real threads, real waits."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from flows.graph import OrderedSlots, StageJob


def _jobs(spec: list[tuple[str, tuple[str, ...]]]) -> list[StageJob]:
    return [StageJob(Path("."), label, label, upstream) for label, upstream in spec]


def _run(slots: OrderedSlots, labels: list[str], started: list[str], hold: float = 0.05,
         fail: tuple[str, ...] = ()) -> list[threading.Thread]:
    """One thread per label, started in the order given, each holding its slot ``hold`` seconds."""
    def body(label: str) -> None:
        try:
            with slots.held(label):
                started.append(label)
                time.sleep(hold)
                if label in fail:
                    raise RuntimeError(label)
        except RuntimeError:
            pass

    threads = []
    for label in labels:
        thread = threading.Thread(target=body, args=(label,))
        thread.start()
        threads.append(thread)
        time.sleep(0.02)  # the later ranks ask first
    return threads


def test_every_stage_waiting_on_one_starts_in_the_graphs_order() -> None:
    jobs = _jobs([("code", ()), ("a", ("code",)), ("b", ("code",)), ("c", ("code",)), ("d", ("code",))])
    slots = OrderedSlots(1, jobs)
    started: list[str] = []
    for thread in _run(slots, ["code"], started):
        thread.join()
    threads = _run(slots, ["d", "c", "b", "a"], started)  # as threads woken at once by the code stage
    for thread in threads:
        thread.join(timeout=10)
    assert started == ["code", "a", "b", "c", "d"]


def test_two_slots_hold_two_stages_and_a_stage_waits_for_its_upstream() -> None:
    jobs = _jobs([("x", ()), ("y", ()), ("z", ("x",))])
    slots = OrderedSlots(2, jobs)
    started: list[str] = []
    threads = _run(slots, ["y", "x"], started, hold=0.3)
    time.sleep(0.1)
    assert sorted(started) == ["x", "y"]  # both at once: two slots
    for thread in threads:
        thread.join()
    for thread in _run(slots, ["z"], started):
        thread.join()
    assert started[-1] == "z"


def test_a_failed_stage_is_first_again_for_its_retry_then_out_of_the_order() -> None:
    jobs = _jobs([("a", ()), ("b", ()), ("c", ("a",))])
    slots = OrderedSlots(1, jobs, retries=1)
    started: list[str] = []
    for thread in _run(slots, ["a"], started, fail=("a",)):
        thread.join()
    # a's retry comes before b, though b asks first
    threads = _run(slots, ["b", "a"], started, fail=("a",))
    for thread in threads:
        thread.join(timeout=10)
    assert started == ["a", "a", "b"]
    # a failed for good: c (its dependent) is never ready and nothing waits for it


@pytest.mark.parametrize("patience", [0.3])
def test_a_ready_stage_that_never_comes_holds_the_others_only_for_the_patience(patience: float) -> None:
    jobs = _jobs([("a", ()), ("b", ())])
    slots = OrderedSlots(1, jobs, patience=patience)
    started: list[str] = []
    clock = time.monotonic()
    for thread in _run(slots, ["b"], started):  # a (first) never asks
        thread.join(timeout=10)
    assert started == ["b"] and patience <= time.monotonic() - clock < patience + 3
