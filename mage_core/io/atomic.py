"""Write files so that a crash never leaves a half-written or corrupted one.

The new content goes to a temporary file in the same folder, is flushed to
disk, then renamed over the target: readers see the old file or the new one. A
folder's whole content is swapped in the same way (``replace_dir``).
"""

from __future__ import annotations

import contextlib
import errno
import json
import hashlib
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator


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


def check_writable(parent: str | Path, prefix: str = ".mage-write-check-") -> None:
    """Raise ``OSError`` unless a folder can be made in ``parent`` (made, with its own
    parents, when missing): the check a command runs before any work, so that an output
    folder it cannot write stops it at once rather than after the work."""
    parent = Path(parent)
    existing = next((p for p in (parent, *parent.parents) if p.exists()), None)
    if existing is not None and not existing.is_dir():  # mkdir would say only "File exists"
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(existing))
    parent.mkdir(parents=True, exist_ok=True)
    try:
        probe = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    except OSError as err:  # named by the folder, not by the probe's random name
        raise type(err)(err.errno, err.strerror, str(parent)) from None
    probe.rmdir()


def writable_problem(err: OSError) -> str:
    """``check_writable``'s error as the end of a one-line message naming the fix."""
    where = f": {err.filename}" if err.filename else ""
    return f"cannot write there ({err.strerror or err}{where}); choose another --out or fix its permissions"


@contextlib.contextmanager
def replace_dir(target: str | Path) -> Iterator[Path]:
    """Build a folder's whole content in a staging folder next to ``target`` (yielded),
    then swap it in: an existing ``target`` is replaced only once the new content is
    complete. If the body (or the swap) fails, ``target`` is left as it was and the
    staging folder is removed, so readers see the old set of files or the new one,
    never a mix."""
    target = Path(target)
    if target.is_symlink():  # a linked output folder stays linked: its content is what is replaced
        target = target.resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = staging_dir(target.parent, f".{target.name}.tmp-")
    try:
        yield staging
        if not target.exists():
            os.replace(staging, target)
            return
        old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
        try:
            os.replace(target, old / target.name)
        except BaseException:
            old.rmdir()
            raise
        try:
            os.replace(staging, target)
        except BaseException:
            os.replace(old / target.name, target)  # put the old one back (kept aside if even that fails)
            old.rmdir()
            raise
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


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

    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


_RUST_OS_ERROR = re.compile(r"os error (\d+)")


def hidden_os_error(err: BaseException, path: str | Path) -> OSError | None:
    """The ``OSError`` (naming ``path``) inside an I/O failure that a library reported in its
    own type (safetensors' Rust writer says "... (os error 28)"); None when ``err`` is already
    an ``OSError`` or is no I/O failure. A full disk then reads the same wherever it happens."""
    if isinstance(err, OSError):
        return None
    found = _RUST_OS_ERROR.search(str(err))
    if found is None:
        return None
    code = int(found.group(1))
    return OSError(code, os.strerror(code), str(path))
