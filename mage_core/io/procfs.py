"""Reading a process's line in Linux ``/proc/<pid>/stat``.

The command name (field 2) is in parentheses and may itself hold spaces or ``)``, so the
fields are split after the *last* ``)``; the list returned starts at field 3 (the state).
"""

from __future__ import annotations


def stat_fields(pid: int | str) -> list[str] | None:
    """Fields 3 onwards of ``/proc/<pid>/stat`` (state, ppid, pgrp, ...); None where the
    process is gone or the system has no /proc."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            text = fh.read()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[-1].split()
    return fields or None


def start_ticks(pid: int | str) -> str | None:
    """The start time of process ``pid`` in clock ticks since boot (field 22), which tells a
    reused pid from the original; None where /proc does not say."""
    fields = stat_fields(pid)
    return fields[19] if fields is not None and len(fields) > 19 else None
