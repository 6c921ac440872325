"""Shared fixtures. Tests say their kind with a marker (see pyproject.toml).

`make test` runs the suite on two pytest-xdist workers (``-n 2 --dist loadgroup``,
docs/testing.md). Each process that runs tests, a worker or a plain ``pytest``, gets
its own Prefect home and Ray temp directory here, before any test module imports
Prefect or Ray; ports come from the OS (port 0) and MLflow stores, DVC repositories and
outputs live under ``tmp_path``/``tmp_path_factory``, which xdist makes per worker. A
worker also runs torch on its share of the cores (one thread on two cores with two
workers), so that two workers do not oversubscribe the machine.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")

#: Per-process folders made in pytest_configure, removed in pytest_unconfigure.
_PRIVATE_DIRS: list[str] = []


def worker_count() -> int:
    """The number of xdist workers of this run (1 outside xdist)."""
    return int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))


def pytest_configure(config: pytest.Config) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER")  # "gw0", "gw1", ... in a worker; unset otherwise
    if worker is None and getattr(config.option, "numprocesses", None):
        # The xdist controller: it runs no tests. A plain `-n N` would deal the tests of an
        # xdist_group (tests that share a module's state, e.g. the reproduce flows' workspace)
        # to different workers: keep the groups (`--dist loadfile` is kept too: it is safe).
        if config.option.dist == "load":
            config.option.dist = "loadgroup"
        return
    tag = worker or "main"
    # Prefect: its home (profiles, local result storage, and the sqlite database of the temporary
    # server that a flow started in a subprocess brings up) must not be shared by two workers.
    if "PREFECT_HOME" not in os.environ:
        home = tempfile.mkdtemp(prefix=f"mage-prefect-{tag}-")
        _PRIVATE_DIRS.append(home)
        os.environ["PREFECT_HOME"] = home
    # Ray: each local instance in its own temp directory (short: Ray's socket paths must fit in
    # 107 bytes), and never the cluster a `ray start` on this machine recorded in /tmp/ray.
    if "RAY_TMPDIR" not in os.environ:
        ray_tmp = tempfile.mkdtemp(prefix=f"ray-{tag}-", dir="/tmp" if sys.platform != "win32" else None)
        _PRIVATE_DIRS.append(ray_tmp)
        os.environ["RAY_TMPDIR"] = ray_tmp
    if worker is not None:
        import torch

        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        torch.set_num_threads(max(1, cores // worker_count()))


def pytest_unconfigure(config: pytest.Config) -> None:
    while _PRIVATE_DIRS:
        shutil.rmtree(_PRIVATE_DIRS.pop(), ignore_errors=True)


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


#: The lock file that lets one local Ray instance run at a time on this machine (all workers of a
#: run, and any other test run here): flock is released when its holder exits, even by a kill.
RAY_LOCK = Path(tempfile.gettempdir()) / "mage-tests-ray.lock"
#: How long a module waits for another's Ray instance before failing with the reason.
RAY_LOCK_WAIT_S = 1200


@pytest.fixture(scope="module")
def ray_slot() -> Iterator[None]:
    """Hold the machine's one Ray slot for the module: a module that starts a local Ray instance
    (itself or through the code it tests) requests this first, so that the Ray modules, each
    starting a dozen processes, wait for each other on this 2-core machine; the rest of the
    suite runs beside them (docs/testing.md)."""
    import fcntl
    import time

    with RAY_LOCK.open("a") as handle:
        deadline = time.monotonic() + RAY_LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    pytest.fail(f"another test's local Ray instance held {RAY_LOCK} for over "
                                f"{RAY_LOCK_WAIT_S} s")
                time.sleep(0.5)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


#: Session fixtures that cost seconds to minutes to build, and the group of the tests that use
#: them: one worker builds each once. The Prefect flow tests (the reproduce flows, whose later
#: tests continue the first one's workspace, the Ray sweep, the deployments) share one Prefect
#: server and do not run their two-core flows beside each other; the ALFWorld games are
#: generated once (alfworld's expert checks every game).
SESSION_GROUPS = {"harness": "prefect", "alfworld_games": "alfworld"}


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]):
    """Under ``--dist loadgroup``: the tests that use one of SESSION_GROUPS' fixtures, and
    otherwise the tests of a module that share one of its module- or class-scoped fixtures
    (a trained run, a Ray instance, an MLflow store), run on one worker, in order, so the
    fixture is built once, not once per worker. An explicit ``xdist_group`` mark wins.
    Without xdist the mark does nothing."""
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        session_group = next((group for name, group in SESSION_GROUPS.items()
                              if name in getattr(item, "fixturenames", ())), None)
        if session_group is not None:
            item.add_marker(pytest.mark.xdist_group(session_group))
        elif _shares_a_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(_module_name(item)))
    result = yield  # xdist's own hook (a worker's) runs in here
    if os.environ.get("PYTEST_XDIST_WORKER"):  # (harmless under the other --dist modes)
        _name_the_groups(items)
    return result


def _module_name(item: pytest.Item) -> str:
    """``integration/test_train`` for tests/integration/test_train.py."""
    return item.nodeid.split("::")[0].removeprefix("tests/").removesuffix(".py")


def _shares_a_module_fixture(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    module = item.nodeid.split("::")[0]
    for name in info.names_closure:
        defs = info.name2fixturedefs.get(name)
        if defs and defs[-1].scope in ("module", "class") and defs[-1].baseid.split("::")[0] == module:
            return True
    return False


def _name_the_groups(items: list[pytest.Item]) -> None:
    """What xdist's worker does for ``--dist loadgroup``, where it has no effect: it appends
    ``@<group>`` to a grouped test's node id (the controller schedules by that suffix), but
    writes ``item._nodeid``, which pytest 9.2 no longer reads (a node id is ``item._id``,
    a structured NodeId, since then); and a worker of a bare ``-n N``, which the controller
    switched to loadgroup after the worker's options were parsed, does not do it at all.
    Without the suffix every group would be dealt out test by test, silently."""
    for item in items:
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                        for m in item.iter_markers("xdist_group")})
        if not names:
            continue
        suffix = "@" + "_".join(names)
        if item.nodeid.endswith(suffix):
            continue  # xdist's own suffix took (a pytest before 9.2, with --dist loadgroup)
        if hasattr(item, "_id"):
            from _pytest.nodeid import NodeId

            item._id = NodeId.parse(item.nodeid + suffix)
        elif hasattr(item, "_nodeid"):  # a pytest before 9.2 (a bare `-n N`: see pytest_configure)
            item._nodeid = item.nodeid + suffix
        else:
            raise pytest.UsageError(f"cannot name the xdist group of {item.nodeid}: run with -n 0 or "
                                    "check the pytest and pytest-xdist versions (docs/testing.md)")
