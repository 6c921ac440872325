"""Write files so that a crash never leaves a half-written or corrupted one.

The new content goes to a temporary file in the same folder, is flushed to
disk, then renamed over the target: readers see the old file or the new one.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


_UMASK = os.umask(0)
os.umask(_UMASK)
#: The mode a plain ``mkdir`` gives a folder: a staging folder (``mkdtemp``: 0700) gets it
#: before it is renamed into place, so a published folder reads like any other.
DIR_MODE = 0o777 & ~_UMASK


def staging_dir(parent: str | Path, prefix: str) -> Path:
    """A new empty folder in ``parent`` to build a result in before renaming it into place,
    with a plain folder's mode."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    os.chmod(path, DIR_MODE)
    return path


def write_bytes_atomic(path: str | Path, data: bytes) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; give the mode a plain open() would
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_text_atomic(path: str | Path, text: str) -> Path:
    return write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: str | Path, data: Any) -> Path:
    return write_text_atomic(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def sha256_file(path: str | Path) -> str:
    """The file's SHA-256, hex, read in 1 MiB pieces."""
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
