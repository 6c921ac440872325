"""The one way this project starts a local Ray instance: every process of it listens on
127.0.0.1 only.

A plain ``ray.init(num_cpus=...)`` on Linux takes the machine's outward address as the
node's IP, and its GCS server, raylet, worker processes (gRPC), runtime-env agent and
autoscaler metrics server listen on that address or on every interface (``0.0.0.0``,
``::``): anyone who reaches the machine can submit code to the unauthenticated instance.
Ray binds each of those to loopback when the node's IP is loopback, which is what it does
by itself on Windows and macOS, where ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER`` (read into
``ray_constants.ENABLE_RAY_CLUSTER``) is off. ``start_local_ray`` turns that off for the
``ray.init`` call (the environment variable for the processes it starts, the constant for
this process in case Ray was imported before) and puts both back afterwards, so a later
connection to a cluster from this process is unaffected. It then checks the node's IP and
refuses an instance that is not on loopback.

Several machines: start a cluster yourself (``ray start``) and set ``RAY_ADDRESS``;
the callers connect to it instead of calling this (docs: infra/README.md).

Nothing of the instance outlives the process that started it, ``kill -9`` included: Ray
fate-shares its GCS, raylet, dashboard, monitor and log monitor with the driver (Linux's
parent-death signal, SIGKILL), and its workers follow the raylet; but the raylet's dashboard
agent and runtime-env agent, on finding the raylet gone, report it to the GCS, which is gone
too, and wait out that call's fixed 60 s timeout (``publish_error_to_driver``, Ray 2.60) before
they exit, one of them still listening on a port. No option of Ray shortens that, so the
instance's processes run in a process group of their own, held by a lifeline keeper
(``mage_core/io/lifeline.py``, ``keep_group``) that stops the whole group when the driver
dies: ``ray.init`` starts its processes with ``process_group`` set to the keeper's group (Ray's
``services.ConsolePopen``, for the call only), and the agents, started by the raylet, inherit it.

``ray`` is imported inside the function: it is slow to import and stays out of
``mage --help``.
"""

from __future__ import annotations

import contextlib
import functools
import os
import subprocess
import sys
from typing import Any, Iterator

#: Where a local instance listens.
LOOPBACK = "127.0.0.1"
#: Ray's switch (``ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR``): "0" makes the node's IP loopback.
CLUSTER_ENV_VAR = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
#: How long Ray waits for its GCS server to publish its port, in seconds (30 by default): a
#: loaded machine may need longer, and 0 makes every start time out (what the tests do).
GCS_WAIT_ENV_VAR = "RAY_gcs_server_port_wait_time_s"
#: Ray's token-authentication switch: "token" or "disabled"; unset, a new local instance turns
#: token authentication on (Ray >= 2.59) and writes "token" here.
AUTH_MODE_ENV_VAR = "RAY_AUTH_MODE"
#: Seconds the instance's processes get between SIGTERM and SIGKILL once its driver is gone
#: (nothing of theirs to save: Ray's own fate-sharing sends SIGKILL at once).
GRACE_S = 1.0

#: The lifeline keeper of the local instance this process started (``keep_group``), if any.
_keeper: subprocess.Popen | None = None


def _stop_keeper() -> None:
    global _keeper
    if _keeper is not None:
        from mage_core.io.lifeline import stop_kept_group

        stop_kept_group(_keeper)
        _keeper = None


@contextlib.contextmanager
def _in_own_group() -> Iterator[None]:
    """The processes ``ray.init`` starts meanwhile join a new process group that dies with this
    process (Linux; elsewhere nothing changes: the parent-death signal is Linux's)."""
    global _keeper
    _stop_keeper()  # an earlier instance's keeper: that instance was shut down
    if not sys.platform.startswith("linux"):
        yield
        return
    from ray._private import services

    from mage_core.io.lifeline import keep_group

    _keeper = keep_group(GRACE_S)
    popen = services.ConsolePopen
    services.ConsolePopen = functools.partial(popen, process_group=_keeper.pid)  # read by start_ray_process
    try:
        yield
    except BaseException:
        _stop_keeper()
        raise
    finally:
        services.ConsolePopen = popen


def shutdown_ray() -> None:
    """``ray.shutdown()``, then stop the keeper of the local instance this process started (if any)."""
    import ray

    ray.shutdown()
    _stop_keeper()


def _sync_auth_mode() -> None:
    """Make this process's cached authentication mode the one in its environment, which the
    instance's processes inherit. Ray reads ``RAY_AUTH_MODE`` into its C++ configuration once
    and refreshes it only when it turns token authentication on by itself (the variable unset):
    a process that started an instance with the variable "disabled" and later starts one with
    it "token" (or the reverse) would otherwise run a GCS that wants a token beside a driver
    that sends none, and ``ray.init`` fails with "Failed to start GCS ... InvalidAuthToken"."""
    import ray

    if AUTH_MODE_ENV_VAR in os.environ and not ray.is_initialized():  # never under a live driver
        from ray._raylet import Config

        Config.initialize("")  # re-reads the RAY_* variables, RAY_AUTH_MODE among them


class RayStartError(RuntimeError):
    """A local Ray instance did not start: the message says why (Ray's words) and what to try."""


def _stop_what_it_left(before: set[int], ray_dir: str) -> None:
    """Kill the processes a failed ``ray.init`` started and left running (its GCS server stays
    up when Ray gives up waiting for it): this process's children that were not there before
    and run Ray's code."""
    import psutil

    for child in psutil.Process().children():
        if child.pid in before:
            continue
        try:
            if ray_dir in " ".join([child.exe(), *child.cmdline()]):
                child.kill()
                child.wait(timeout=10)
        except (psutil.Error, OSError):
            pass  # gone already, or not ours to read


def start_local_ray(num_cpus: int, *, without_ray: str = "run it without Ray", **init_kwargs: Any) -> None:
    """Start a new local Ray instance with ``num_cpus`` logical CPUs, no dashboard, listening
    on 127.0.0.1 only, whose processes die with this one; ``init_kwargs`` go to ``ray.init``
    (``log_to_driver``, ``logging_level``). Stop it with ``shutdown_ray``. ``without_ray``: how
    the caller's command runs without Ray, named in the ``RayStartError`` raised when the
    instance does not start (nothing of it is left running then).

    Never connects to an existing cluster (``address="local"``, whatever ``RAY_ADDRESS`` says).
    """
    import psutil

    previous = os.environ.get(CLUSTER_ENV_VAR)
    os.environ[CLUSTER_ENV_VAR] = "0"  # before `import ray`, and inherited by the processes it starts
    try:
        import ray
        from ray._private import ray_constants

        _sync_auth_mode()
        enabled = ray_constants.ENABLE_RAY_CLUSTER
        ray_constants.ENABLE_RAY_CLUSTER = False  # read by services.get_node_ip_address at each call
        before = {child.pid for child in psutil.Process().children()}
        try:
            with _in_own_group():  # dies with this process, kill -9 included
                ray.init(address="local", num_cpus=num_cpus, include_dashboard=False,
                         _node_ip_address=LOOPBACK, **init_kwargs)
        except Exception as err:
            if ray.is_initialized():
                ray.shutdown()
            _stop_what_it_left(before, os.path.dirname(ray.__file__))
            reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
            wait = os.environ.get(GCS_WAIT_ENV_VAR)
            raise RayStartError(
                f"a local Ray instance did not start ({reason}). Try the command again (a loaded machine starts "
                f"Ray slowly); if it fails again, give Ray longer to start ({GCS_WAIT_ENV_VAR}, seconds: "
                f"{'now ' + wait if wait is not None else '30 by default'}), check that the Ray temp folder "
                f"({os.environ.get('RAY_TMPDIR', '/tmp')}) has free space, or {without_ray}") from err
        finally:
            ray_constants.ENABLE_RAY_CLUSTER = enabled
    finally:
        if previous is None:
            os.environ.pop(CLUSTER_ENV_VAR, None)
        else:
            os.environ[CLUSTER_ENV_VAR] = previous
    node_ip = ray.util.get_node_ip_address()
    if node_ip != LOOPBACK:
        shutdown_ray()
        raise RuntimeError(f"the local Ray instance took {node_ip} as its address, not {LOOPBACK}: its "
                           "processes would listen beyond this machine, so it was shut down")
