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

import psutil
import pytest

from mage_core.backends.ray_local import CLUSTER_ENV_VAR, start_local_ray

pytestmark = pytest.mark.integration


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
