"""Processes that die with the process that started them (docs/faults.md, "Interruptions").

``mage reproduce`` starts a flow, which starts a Prefect server and ``dvc repro``, which starts
the stage commands; ``mage ui`` starts an MLflow server with workers of its own. A Ctrl-C
reaches all of them (one foreground process group); a ``kill -9`` of the parent reaches none,
and they would go on starting stages or holding a port. Linux can tell a process when its
parent dies (``prctl(PR_SET_PDEATHSIG)``), a setting kept across ``exec``:

- ``die_with_parent()``: this process receives SIGTERM when its parent dies. The project's
  own entry points (``mage``, ``python -m flows``) call it when ``LIFELINE_ENV`` is set, which
  the commands that start pipelines set for their whole process tree (the flow asks for SIGKILL:
  Prefect catches SIGTERM and would wait for the running stages);
- ``from_environment()`` also finds the ``dvc repro`` that runs this process as a stage command,
  however that ``dvc repro`` was started (by hand too): DVC puts ``DVC_STAGE`` in the environment
  of each stage command, which it runs through ``$SHELL -c``. bash runs a lone command in the
  shell's own process (exec), dash (``/bin/sh`` on Debian, DVC's shell when ``SHELL`` is unset)
  keeps the shell between them, and a shell waiting for its command does not die with dvc. So
  the process dies with dvc either way: by the parent-death signal when dvc is its parent, and
  when a shell stands between, by that signal from the shell and a thread that waits on dvc's
  ``pidfd``. A command started outside DVC (``nohup mage train &``) has no ``DVC_STAGE`` and is
  left alone;
- ``python -m mage_core.io.lifeline CMD ...``: the same for a program that is not ours (dvc,
  uvicorn), then ``exec`` of it: nothing stays in between;
- ``python -m mage_core.io.lifeline --group CMD ...``: for a program whose own children would
  outlive it (``mlflow server``): started as the leader of a process group of its own
  (``start_new_session``), it runs CMD in that group and, when its parent dies or it is asked to
  stop, stops the whole group (SIGTERM, then SIGKILL after ``GRACE_S``).

Elsewhere than Linux these are no-ops: a kill -9 of the parent leaves the children, as before.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import subprocess
import sys
import threading
import time

from mage_core.io.procfs import stat_fields

#: Set (to "1") in the environment of a process tree whose members should die with their parent.
LIFELINE_ENV = "MAGE_DIE_WITH_PARENT"
PR_SET_PDEATHSIG = 1
#: Set by DVC in the environment of every stage command it runs (the stage's address,
#: dvc/stage/run.py), and inherited by what that command starts.
DVC_STAGE_ENV = "DVC_STAGE"
#: Seconds a group gets between SIGTERM and SIGKILL.
GRACE_S = 10.0


def die_with_parent(sig: int = signal.SIGTERM, expected_parent: int | None = None) -> bool:
    """Have the kernel send ``sig`` to this process when its parent dies; if the parent is
    already gone (it died before this call: the process was handed to init), send it now.
    Whether the kernel took the setting (False elsewhere than Linux)."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        return False
    parent = os.getppid()
    if (expected_parent is not None and parent != expected_parent) or parent == 1:
        os.kill(os.getpid(), sig)
    return True


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (also one of another user's, which may not be signalled)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _environ(pid: int) -> dict[str, str] | None:
    """The environment process ``pid`` was started with (Linux /proc); None where it cannot be read."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {key.decode(errors="replace"): value.decode(errors="replace") for key, value in pairs}


def _parent_of(pid: int) -> int | None:
    fields = stat_fields(pid)
    return int(fields[1]) if fields is not None and len(fields) > 1 else None


def dvc_runner() -> tuple[int, int | None] | None:
    """``(dvc, shell)``: the ``dvc repro`` process that runs this process as a stage command, and
    the shell between them (None when dvc is the parent: bash execs a lone command); None when
    this process is not a stage command of a live dvc (no ``DVC_STAGE``, or it is inherited from
    further up: a process that the stage command started, such as a rank under ``torchrun``).

    dvc is the nearest ancestor, parent or grandparent, whose own environment lacks this
    process's ``DVC_STAGE``: dvc sets it for the command, not for itself. No names are matched."""
    stage = os.environ.get(DVC_STAGE_ENV)
    if not stage or not sys.platform.startswith("linux"):
        return None
    parent = os.getppid()
    shell = None
    for candidate in (parent, _parent_of(parent)):
        if candidate is None or candidate <= 1:
            return None  # handed to init: what started it is gone, or it was meant to be detached
        environ = _environ(candidate)
        if environ is None:
            return None
        if environ.get(DVC_STAGE_ENV) != stage:
            return candidate, shell
        shell = candidate
    return None


def _signal_self(sig: int) -> None:
    os.kill(os.getpid(), sig)


def die_with(pid: int, sig: int = signal.SIGTERM, via: int | None = None) -> bool:
    """Have ``sig`` sent to this process when process ``pid`` ends: ``pid`` is its parent
    (``die_with_parent``), or the parent of ``via``, this process's parent (a thread waits on
    ``pid``'s pidfd; the parent-death signal covers ``via``). If ``pid`` is gone already, now.
    Whether it is watched (False elsewhere than Linux)."""
    if via is None:
        return die_with_parent(sig, expected_parent=pid)
    if not die_with_parent(sig, expected_parent=via):
        return False
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        _signal_self(sig)
        return True
    except (AttributeError, OSError):  # a kernel before 5.3: poll instead
        fd = None
    if _parent_of(via) != pid:  # pid died before the pidfd was opened (and may have been reused)
        if fd is not None:
            os.close(fd)
        _signal_self(sig)
        return True

    def wait() -> None:
        if fd is not None:
            select.select([fd], [], [])  # readable once the process has ended
            os.close(fd)
        else:
            while _parent_of(via) == pid:
                time.sleep(0.5)
        _signal_self(sig)

    threading.Thread(target=wait, name=f"lifeline-{pid}", daemon=True).start()
    return True


def from_environment(sig: int = signal.SIGTERM) -> bool:
    """Have this process die (``sig``) with the process it belongs to, if any: the ``dvc repro``
    that runs it as a stage command (``dvc_runner``: however dvc was started), or its parent in
    a tree that asked for it (``LIFELINE_ENV``). Whether it does."""
    runner = dvc_runner()
    if runner is not None:
        dvc, shell = runner
        return die_with(dvc, sig, via=shell)
    if os.environ.get(LIFELINE_ENV) == "1":
        die_with_parent(sig)
        return True
    return False


def wrap(cmd: list[str], group: bool = False, grace_s: float | None = None) -> list[str]:
    """``cmd`` run through this module: it dies with the process that starts it (``group``: its
    whole process group does; start it with ``start_new_session=True``, or ``process_group=0``
    for a group that other processes of the session may join; ``grace_s``: the group's seconds
    between SIGTERM and SIGKILL, ``GRACE_S`` by default). With ``group`` and no ``cmd``, the
    group is held empty until the parent dies or the process is stopped (``keep_group``)."""
    grace = ["--grace", f"{grace_s:g}"] if grace_s is not None else []
    return [sys.executable, "-m", "mage_core.io.lifeline", *(["--group", *grace] if group else []), "--", *cmd]


def keep_group(grace_s: float = GRACE_S) -> subprocess.Popen:
    """Start a process that leads an empty process group of this session and stops the whole
    group (SIGTERM, SIGKILL after ``grace_s``) when this process dies, ``kill -9`` included, or
    when it is stopped itself (``stop_kept_group``). Processes started with
    ``process_group=<its pid>`` join the group: they die with this process too."""
    return subprocess.Popen(wrap([], group=True, grace_s=grace_s), process_group=0, stdin=subprocess.DEVNULL)


def stop_kept_group(keeper: subprocess.Popen, timeout_s: float = 30.0) -> None:
    """Stop a ``keep_group`` process and, with it, what is left of its group."""
    if keeper.poll() is None:
        keeper.terminate()
    try:
        keeper.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(keeper.pid, signal.SIGKILL)
        keeper.wait()


def _supervise(cmd: list[str], grace_s: float = GRACE_S) -> int:
    """Run ``cmd`` in this process's group (of which this process is the leader) until it exits
    (no ``cmd``: until stopped); on SIGTERM/SIGINT/SIGHUP, or when the parent dies (SIGTERM),
    stop the whole group: SIGTERM, then SIGKILL after ``grace_s``."""
    if os.getpgrp() != os.getpid():
        print("lifeline --group: not a process-group leader (start it with start_new_session=True)",
              file=sys.stderr)
        return 2
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        if stopping:
            return
        stopping = True
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the group's SIGTERM reaches this process too
        try:
            os.killpg(os.getpgrp(), signal.SIGTERM)
        except ProcessLookupError:
            pass

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stop)
    die_with_parent()
    if stopping:  # the parent was gone already
        return 0
    child = None
    if cmd:
        try:
            child = subprocess.Popen(cmd)
        except OSError as err:
            print(f"lifeline: cannot run {cmd[0]}: {err.strerror}", file=sys.stderr)
            return 127
    while child is None and not stopping:  # an empty group, held for the processes that join it
        time.sleep(0.2)
    code = 0
    while child is not None:
        try:
            code = child.wait(timeout=0.5)
            break
        except subprocess.TimeoutExpired:
            if stopping:
                try:
                    code = child.wait(timeout=grace_s)
                except subprocess.TimeoutExpired:
                    code = -signal.SIGKILL
                break
    if not stopping:
        return 128 - code if code < 0 else code  # a child ended by signal N: 128 + N, as a shell says
    deadline = time.monotonic() + grace_s  # the command's own children (or the group's members), given the same grace
    while time.monotonic() < deadline and _group_has_others():
        time.sleep(0.1)
    if _group_has_others():
        os.killpg(os.getpgrp(), signal.SIGKILL)  # takes this process too: nothing of the group is left
    return 0


def _group_has_others() -> bool:
    """Whether a process other than this one is left in this process's group (Linux /proc)."""
    me, group = os.getpid(), os.getpgrp()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        fields = stat_fields(entry)
        if fields is not None and len(fields) > 2 and int(fields[2]) == group and fields[0] != "Z":
            return True
    return False


USAGE = "usage: python -m mage_core.io.lifeline [--group [--grace SECONDS]] -- CMD [ARG ...]"


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    group, grace_s = False, GRACE_S
    if args[:1] == ["--group"]:
        group, args = True, args[1:]
        if args[:1] == ["--grace"]:
            try:
                grace_s, args = float(args[1]), args[2:]
            except (IndexError, ValueError):
                print(USAGE, file=sys.stderr)
                return 2
    separated = args[:1] == ["--"]
    if separated:
        args = args[1:]
    if not args and not (group and separated):  # `--group --` alone holds an empty group (keep_group)
        print(USAGE, file=sys.stderr)
        return 2
    if group:
        return _supervise(args, grace_s)
    die_with_parent()
    try:
        os.execvp(args[0], args)
    except OSError as err:
        print(f"lifeline: cannot run {args[0]}: {err.strerror}", file=sys.stderr)
        return 127
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main())
