"""One command writes an output folder at a time: ``mage train``, ``mage evaluate`` and
``mage sft`` hold the lock of their ``--out`` (``mage_core.io.workspace_lock.output_lock``)
from before any work to their end; a second command on the same folder stops with one line
naming the holder (command, PID, since when), exit 2, having written nothing. The kernel
frees the lock with its holder, ``kill -9`` included."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

from mage_core.config import ConfigError
from mage_core.io.workspace_lock import OutputBusy, output_lock


@contextlib.contextmanager
def writer_lock(out_dir: Path, what: str) -> Iterator[int | None]:
    """Hold ``out_dir``'s lock while the block runs; another holder: ConfigError (exit 2)."""
    try:
        with output_lock(out_dir, what) as fd:
            yield fd
    except OutputBusy as err:
        raise ConfigError("command line", [str(err)]) from None
