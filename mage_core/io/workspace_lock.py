"""One run at a time in a workspace: an exclusive lock that names who holds it.

``mage reproduce`` (and ``mage sweep``) take ``.mage.lock`` in the workspace before they
write anything there, and hand the locked file to the flow process they start, so the
lock lives as long as the flow does: two runs started at once, or a rerun while a
killed command's flow still runs, stop with one line naming the holder instead of
colliding in DVC or the workspace set-up. The kernel releases the lock when the last
process holding it ends (a crash or ``kill -9`` included): no stale lock to clean up.
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


class WorkspaceBusy(RuntimeError):
    """Another run holds the workspace's lock."""


@contextlib.contextmanager
def workspace_lock(workspace: Path, what: str) -> Iterator[int]:
    """Hold ``workspace``'s lock while the block runs (``WorkspaceBusy`` naming the holder
    if another process has it); yields the locked file descriptor, which a child process
    keeps the lock through when it is passed to it (``subprocess.run(..., pass_fds=(fd,))``)."""
    workspace.mkdir(parents=True, exist_ok=True)
    path = workspace / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = path.read_text(encoding="utf-8", errors="replace").strip() or "a process"
        os.close(fd)
        raise WorkspaceBusy(f"{workspace}: another run is live in this workspace ({holder}; it or the flow it "
                            "started holds the lock): wait for it to end, or stop it, then run again") from None
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{what}, PID {os.getpid()}, since {time.strftime('%Y-%m-%d %H:%M:%S %Z')}".encode())
        yield fd
    finally:
        os.close(fd)  # the lock goes with the last process that holds the file open
