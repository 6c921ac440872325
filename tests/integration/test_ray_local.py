"""A local Ray instance (``mage_core.backends.ray_local.start_local_ray``, what ``mage sweep
--ray`` and ``rollout.workers`` > 0 start without ``RAY_ADDRESS``) listens on loopback only.

Started for real, with a task run on it so that a worker process is up; then every listening
TCP socket of every process it started (the test process's children, and any process whose
command line names the instance's session folder), and those the test process itself opened
for it (the driver's gRPC server), must be on 127.0.0.1 or ::1. A plain ``ray.init`` on Linux
listens on the machine's address or on 0.0.0.0 / :: instead.
"""

from __future__ import annotations

import ipaddress
import os
import time
from pathlib import Path

import psutil
import pytest

from mage_core.backends.ray_local import CLUSTER_ENV_VAR, start_local_ray

pytestmark = pytest.mark.integration

#: Ray's own setting: how long it waits for its GCS server to publish its port (0: every start times out).
GCS_WAIT_ENV_VAR = "RAY_gcs_server_port_wait_time_s"


def _listening(process: psutil.Process) -> set[tuple[str, int]]:
    try:
        return {(c.laddr.ip, c.laddr.port) for c in process.net_connections(kind="inet")
                if c.status == psutil.CONN_LISTEN}
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return set()


def _is_loopback(ip: str) -> bool:
    address = ipaddress.ip_address(ip.split("%")[0])
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped  # ::ffff:127.0.0.1, a dual-stack socket bound to 127.0.0.1
    return address.is_loopback


def _ray_processes(session_dir: str) -> list[psutil.Process]:
    me = psutil.Process()
    found = {p.pid: p for p in me.children(recursive=True)}
    for p in psutil.process_iter(["cmdline"]):
        try:
            if p.pid != me.pid and session_dir in " ".join(p.info["cmdline"] or []):
                found.setdefault(p.pid, p)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            pass
    return list(found.values())


def test_a_local_ray_instance_listens_on_loopback_only(monkeypatch: pytest.MonkeyPatch, ray_slot: None) -> None:
    import ray

    assert not ray.is_initialized(), "a Ray instance from another test is still running in this process"
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")  # ignored: the helper always starts its own instance
    monkeypatch.delenv(CLUSTER_ENV_VAR, raising=False)
    from ray._private import ray_constants

    enabled = ray_constants.ENABLE_RAY_CLUSTER
    me = psutil.Process()
    before = _listening(me)
    start_local_ray(1, logging_level="WARNING")
    try:
        # The switch is back as it was, for this process and what it starts later.
        assert CLUSTER_ENV_VAR not in os.environ and ray_constants.ENABLE_RAY_CLUSTER == enabled

        @ray.remote(num_cpus=1)
        def worker_pid() -> int:
            return os.getpid()

        worker = ray.get(worker_pid.remote(), timeout=60)
        session_dir = ray._private.worker._global_node.get_session_dir_path()
        # The agents open their ports while the node starts; give the last ones a moment.
        sockets: dict[str, set[tuple[str, int]]] = {}
        deadline = time.monotonic() + 3.0
        while True:
            processes = _ray_processes(session_dir)
            sockets = {f"{p.pid} {p.name()}": _listening(p) for p in processes}
            sockets[f"{me.pid} driver"] = _listening(me) - before
            names = " ".join(sockets)
            if time.monotonic() > deadline or ("gcs_server" in names and "raylet" in names
                                               and "RuntimeEnvAgent" in names):
                break
            time.sleep(0.2)
        assert worker in {p.pid for p in processes}
        listening = {(who, ip, port) for who, socks in sockets.items() for ip, port in socks}
        # Not vacuous: the GCS server, the raylet, the worker and the driver each listen somewhere.
        for who in ("gcs_server", "raylet", str(worker), "driver"):
            assert any(who in entry[0] for entry in listening), (who, sorted(listening))
        exposed = sorted(entry for entry in listening if not _is_loopback(entry[1]))
        assert not exposed, f"Ray processes listening beyond loopback: {exposed}"
        assert ray.util.get_node_ip_address() == "127.0.0.1"  # what the other nodes would be told
    finally:
        ray.shutdown()


def test_instances_one_after_another_in_one_process_whatever_the_auth_mode(monkeypatch: pytest.MonkeyPatch,
                                                                          ray_slot: None) -> None:
    """Ray turns token authentication on for a new local instance when ``RAY_AUTH_MODE`` is
    unset (writing "token" into the environment) and reads the variable into its C++
    configuration once: an instance started with it "disabled" and then one with it "token"
    in one process used to fail (CI, 2026-11-27/28: "Failed to start GCS ... InvalidAuthToken ...
    RAY_AUTH_MODE is currently 'disabled'": the GCS wanted a token, the driver sent none).
    ``start_local_ray`` makes the driver's mode the environment's first (without it the third
    instance fails)."""
    import ray

    assert not ray.is_initialized(), "a Ray instance from another test is still running in this process"
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)

    @ray.remote(num_cpus=1)
    def one() -> int:
        return 1

    modes = []
    for mode in (None, "disabled", "token"):
        if mode is not None:
            monkeypatch.setenv("RAY_AUTH_MODE", mode)
        start_local_ray(1, logging_level="WARNING")
        try:
            assert ray.get(one.remote(), timeout=60) == 1
        finally:
            ray.shutdown()
        modes.append(os.environ.get("RAY_AUTH_MODE"))
    assert modes == ["token", "disabled", "token"]  # unset: Ray's own default, token


def _ray_children(ray_dir: str) -> list[psutil.Process]:
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if ray_dir in " ".join([child.exe(), *child.cmdline()]):
                found.append(child)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            pass
    return found


def test_an_instance_that_does_not_start_in_time_is_one_error_and_leaves_nothing(
        monkeypatch: pytest.MonkeyPatch, ray_slot: None) -> None:
    """Issue 39: Ray timing out at start (here: its wait for the GCS server's port made 0 s,
    Ray's own setting) ended in a raw traceback and left the GCS server running beside the
    driver. Now: a RayStartError saying why and what to try; nothing of it runs; the next
    start in the same process works."""
    import ray

    assert not ray.is_initialized(), "a Ray instance from another test is still running in this process"
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    monkeypatch.setenv(GCS_WAIT_ENV_VAR, "0")
    ray_dir = os.path.dirname(ray.__file__)
    with pytest.raises(Exception) as raised:
        start_local_ray(1, without_ray="set rollout.workers: 0", logging_level="WARNING")
    assert type(raised.value).__name__ == "RayStartError", raised.value  # what the command line names
    message = str(raised.value)
    assert message.startswith("a local Ray instance did not start (Timed out waiting for file ")
    assert "\n" not in message
    assert f"{GCS_WAIT_ENV_VAR}, seconds: now 0" in message and message.endswith("or set rollout.workers: 0")
    assert not ray.is_initialized() and _ray_children(ray_dir) == []
    monkeypatch.delenv(GCS_WAIT_ENV_VAR)
    start_local_ray(1, logging_level="WARNING")
    ray.shutdown()


def test_mage_train_whose_rollout_workers_cannot_start_ray_is_one_line(
        tmp_path: Path, project_root: Path, mage_cmd: list[str], ray_slot: None) -> None:
    """The same through ``mage train`` with ``rollout.workers`` > 0: one line with the cause and what
    to try (rollout.workers: 0 among it), exit 1 (a failure during the work), no traceback."""
    import subprocess

    done = subprocess.run([*mage_cmd, "train", "--params", str(project_root / "params.yaml"), "--out",
                           str(tmp_path / "run"), "--set", "rollout.workers=2", "--set", "tracking.mlflow=false"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, GCS_WAIT_ENV_VAR: "0", "RAY_USAGE_STATS_ENABLED": "0"})
    assert done.returncode == 1, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Ray did not start: a local Ray instance did not start ("), lines
    assert "set rollout.workers: 0" in lines[0]
