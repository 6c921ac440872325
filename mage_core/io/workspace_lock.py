"""One run at a time in a workspace, one writer at a time of an output folder: exclusive
locks that name who holds them.

``mage reproduce`` (and ``mage sweep``) take ``.mage.lock`` in the workspace before they
write anything there, and hand the locked file to the flow process they start, so the
lock lives as long as the flow does: two runs started at once, or a rerun while a
killed command's flow still runs, stop with one line naming the holder instead of
colliding in DVC or the workspace set-up. ``mage train``, ``mage evaluate`` and ``mage sft``
take the lock of their ``--out`` (``output_lock``: ``.<name>.mage.lock`` next to the folder,
never inside it, since ``mage evaluate`` and ``mage sft`` write their folder whole and DVC
hashes it; ``*.mage.lock`` is in .dvcignore, so a lock file never changes a dependency such
as ``artifacts/eval``), so a second command writing the same folder stops before any work.
The kernel releases a lock when the last process holding it ends (a crash or ``kill -9``
included): no stale lock to clean up. The lock files themselves stay (empty of meaning
once free), as removing one while another process may be opening it would let two hold it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path
from typing import Iterator

#: The lock file's name in a workspace (git-ignored).
LOCK_NAME = ".mage.lock"
#: The ending of an output folder's lock file, ``.<folder name>.mage.lock`` beside it (git- and DVC-ignored).
OUTPUT_LOCK_SUFFIX = ".mage.lock"
#: Set by a command for the processes it launches that write its ``--out`` under its lock (the
#: ranks of ``mage train`` under its torchrun): the lock file's path; they do not take it again.
HELD_ENV = "MAGE_OUTPUT_LOCK_HELD"


class WorkspaceBusy(RuntimeError):
    """Another run holds the workspace's lock."""


class OutputBusy(RuntimeError):
    """Another command holds the lock of an output folder."""


def acquire(path: Path, what: str) -> int:
    """Take the exclusive lock of the file ``path`` (made with its folder) and write ``what``, this
    PID and the time into it; return the locked file descriptor (closing it, in the last process
    that has it, releases the lock; a child process keeps the lock through it when it is passed
    on: ``subprocess.run(..., pass_fds=(fd,))``). ``BlockingIOError`` with the holder's line as
    its message when another process has it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = path.read_text(encoding="utf-8", errors="replace").strip() or "a process"
        os.close(fd)
        raise BlockingIOError(holder) from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{what}, PID {os.getpid()}, since {time.strftime('%Y-%m-%d %H:%M:%S %Z')}".encode())
    return fd


@contextlib.contextmanager
def workspace_lock(workspace: Path, what: str) -> Iterator[int]:
    """Hold ``workspace``'s lock while the block runs (``WorkspaceBusy`` naming the holder
    if another process has it); yields the locked file descriptor (see ``acquire``)."""
    try:
        fd = acquire(workspace / LOCK_NAME, what)
    except BlockingIOError as busy:
        raise WorkspaceBusy(f"{workspace}: another run is live in this workspace ({busy}; it or the flow it "
                            "started holds the lock): wait for it to end, or stop it, then run again") from None
    try:
        yield fd
    finally:
        os.close(fd)  # the lock goes with the last process that holds the file open


def output_lock_path(out_dir: Path) -> Path:
    """The lock file of the output folder ``out_dir``: ``.<name>.mage.lock`` beside it (the
    folder's real path: two names of one folder share the lock)."""
    real = Path(os.path.realpath(out_dir))
    return real.parent / f".{real.name}{OUTPUT_LOCK_SUFFIX}"


@contextlib.contextmanager
def output_lock(out_dir: Path, what: str) -> Iterator[int | None]:
    """Hold the lock of the output folder ``out_dir`` while the block runs: one command writes
    it at a time. ``OutputBusy``, one line naming the holder (command, PID, since when), if
    another process has it. Within a process tree that holds it already (``HELD_ENV`` names
    it: the ranks its command launched) nothing is taken (yields None)."""
    path = output_lock_path(out_dir)
    if os.environ.get(HELD_ENV) == str(path):
        yield None
        return
    try:
        fd = acquire(path, what)
    except BlockingIOError as busy:
        raise OutputBusy(f"--out {out_dir}: another command is writing this folder ({busy}): wait for it to "
                         "end, or stop it, or choose another --out; nothing was written") from None
    except OSError:  # no lock file beside the folder (a read-only parent): the command's own check of
        fd = None    # --out says what is wrong, or it runs unlocked, as before
    try:
        yield fd
    finally:
        if fd is not None:
            os.close(fd)
