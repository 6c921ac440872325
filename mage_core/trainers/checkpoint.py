"""Crash-safe checkpoints: tensors in safetensors, the rest in a weights-only torch file.

Layout of ``directory``::

    step-000120/  model.safetensors  state.pt  meta.json
    step-000130/  ...
    latest        "step-000130"  (the commit point)

A save writes everything into a hidden temporary folder next to the final one,
fsyncs every file and the folder, renames the folder into place (atomic on
POSIX), fsyncs the parent, and only then moves the ``latest`` pointer (temp file
+ ``os.replace``). A crash at any moment (SIGKILL included) leaves either the old
checkpoint as latest or the new one, never a half one. Older checkpoints beyond
``keep_last`` are removed only after the new one is committed.

``meta.json`` records a sha256 and the size of every file, so a truncated or
corrupted file is named on load. Loading never deletes or writes anything; when
the latest checkpoint is damaged the error names the newest intact one.

``state`` is anything ``torch.load(weights_only=True)`` accepts: dicts, lists,
tuples, str, int (any size), float, bool, None and tensors. RNG states fit:
``capture_rng`` turns numpy/torch/python generators into such values.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import re
import shutil
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch

from mage_core.io.atomic import hidden_os_error, sha256_file, write_text_atomic
from mage_core.io.lifeline import pid_alive
from mage_core.io.dotted import flatten

FORMAT_VERSION = 1
POINTER = "latest"
FILES = ("model.safetensors", "state.pt")  # hashed data files; meta.json describes them
META = "meta.json"
_STEP_DIR = re.compile(r"^step-(\d+)$")
_TMP_PREFIX = ".tmp-"
_SAFE_SCALARS = (str, int, float, bool, type(None), torch.Tensor, torch.Size, torch.dtype)


class CheckpointError(Exception):
    """A checkpoint is missing, damaged or belongs to another run."""


def step_dir_name(step: int) -> str:
    return f"step-{step:06d}"


def _fsync_file(path: Path) -> None:
    with open(path, "rb") as fh:
        os.fsync(fh.fileno())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _canonical(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def check_weights_only_safe(value: Any, where: str = "state") -> None:
    """Raise ValueError naming the dotted path of the first value that
    ``torch.load(weights_only=True)`` would refuse (e.g. a numpy array)."""
    if isinstance(value, Mapping):
        for k, v in value.items():
            if not isinstance(k, (str, int)):
                raise ValueError(f"{where}: key {k!r} is a {type(k).__name__}; use str or int keys")
            check_weights_only_safe(v, f"{where}.{k}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            check_weights_only_safe(v, f"{where}[{i}]")
    elif not isinstance(value, _SAFE_SCALARS):
        hint = " (convert it with torch.from_numpy or .tolist())" if isinstance(value, np.ndarray) else ""
        raise ValueError(f"{where} is a {type(value).__name__}, which a weights-only load refuses{hint}")


def _unshare(tensors: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """safetensors refuses tensors that share memory (tied embeddings): copy
    every tensor whose storage an earlier one already uses."""
    seen: set[int] = set()
    out: dict[str, torch.Tensor] = {}
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"tensors[{name!r}] is a {type(t).__name__}, not a tensor")
        t = t.detach().cpu()
        ptr = t.untyped_storage().data_ptr() if t.numel() else -1
        out[name] = t.clone(memory_format=torch.contiguous_format) if (ptr in seen or not t.is_contiguous()) else t
        if ptr != -1:
            seen.add(ptr)
    return out


class _RecordingWriter(io.RawIOBase):
    """A file that keeps the ``OSError`` its writes raised: PyTorch's zip writer reports a failed
    write as ``RuntimeError: ... unexpected pos``, dropping the cause (a full disk, a file-size
    limit)."""

    def __init__(self, handle: Any) -> None:
        super().__init__()
        self.handle, self.error = handle, None

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        try:
            return self.handle.write(data)
        except OSError as err:
            self.error = err
            raise


def _torch_save(obj: Any, path: Path, shown: Path) -> None:
    """``torch.save(obj, path)``; a write that fails raises its ``OSError``, naming ``shown``."""
    sink: _RecordingWriter | None = None
    try:
        with open(path, "wb") as handle:  # buffered: a short write is retried until it fails outright
            sink = _RecordingWriter(handle)
            torch.save(obj, sink)
    except RuntimeError as err:
        if sink is None or sink.error is None:
            raise
        raise OSError(sink.error.errno, sink.error.strerror, str(shown)) from err
    except OSError as err:  # the last bytes, flushed when the file closes
        if err.filename is not None or err.errno is None:
            raise
        raise OSError(err.errno, err.strerror, str(shown)) from err


class CheckpointManager:
    """Save, find and load checkpoints in one folder (one writer at a time)."""

    def __init__(self, directory: str | Path, keep_last: int = 2) -> None:
        if keep_last < 1:
            raise ValueError(f"keep_last must be >= 1, got {keep_last}")
        self.directory = Path(directory)
        self.keep_last = keep_last

    # -- finding --------------------------------------------------------------------------------

    def checkpoints(self) -> list[tuple[int, Path]]:
        """Committed-looking checkpoint folders (a meta.json inside), by step ascending."""
        if not self.directory.is_dir():
            return []
        found = []
        for child in self.directory.iterdir():
            m = _STEP_DIR.match(child.name)
            if m and child.is_dir() and (child / META).is_file():
                found.append((int(m.group(1)), child))
        return sorted(found)

    def latest(self) -> Path | None:
        """The checkpoint the ``latest`` pointer names; without a pointer (a crash
        between the first rename and the first pointer write), the newest complete
        folder. Never a temporary (half-written) folder."""
        pointer = self.directory / POINTER
        if pointer.is_file():
            name = pointer.read_text(encoding="utf-8").strip()
            if not _STEP_DIR.match(name):
                raise CheckpointError(f"{pointer}: the latest pointer holds {name!r}, not a step-NNNNNN name")
            return self.directory / name
        found = self.checkpoints()
        return found[-1][1] if found else None

    # -- saving ---------------------------------------------------------------------------------

    def save(self, step: int, tensors: Mapping[str, torch.Tensor], state: Mapping[str, Any],
             metadata: Mapping[str, Any]) -> Path:
        """Write checkpoint ``step`` and make it the latest; returns its folder."""
        if step < 0:
            raise ValueError(f"step must be >= 0, got {step}")
        check_weights_only_safe(dict(state))
        try:
            _canonical(dict(metadata))
        except TypeError as err:
            raise ValueError(f"metadata must be JSON-serializable: {err}") from None
        from safetensors.torch import save_file

        self.directory.mkdir(parents=True, exist_ok=True)
        self._remove_stale_temporaries()
        final = self.directory / step_dir_name(step)
        current = self.latest()
        if current is not None and current.name == final.name and final.exists():
            raise CheckpointError(f"{final} is the latest checkpoint; refusing to overwrite it in place "
                                  "(save under a new step)")
        tmp = self.directory / f"{_TMP_PREFIX}{final.name}-{os.getpid()}"
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir()
        try:
            save_file(_unshare(tensors), str(tmp / FILES[0]))
            _torch_save(dict(state), tmp / FILES[1], final)
            files = {}
            for name in FILES:
                _fsync_file(tmp / name)
                files[name] = {"sha256": sha256_file(tmp / name), "bytes": (tmp / name).stat().st_size}
            meta = {"format_version": FORMAT_VERSION, "step": step, "files": files,
                    "metadata": dict(metadata)}
            meta["meta_sha256"] = hashlib.sha256(_canonical(meta).encode()).hexdigest()
            with open(tmp / META, "w", encoding="utf-8") as fh:
                fh.write(json.dumps(meta, indent=2, sort_keys=True) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
            _fsync_dir(tmp)
            if final.exists():  # an uncommitted leftover of this step (crash before the pointer moved)
                aside = self.directory / f"{_TMP_PREFIX}old-{final.name}-{os.getpid()}"
                os.rename(final, aside)
                shutil.rmtree(aside)
            os.rename(tmp, final)
            _fsync_dir(self.directory)
        except BaseException as err:
            shutil.rmtree(tmp, ignore_errors=True)
            io_error = hidden_os_error(err, final) if isinstance(err, Exception) else None
            if io_error is not None:  # e.g. safetensors' "(os error 28)": disk full
                raise io_error from err
            raise
        write_text_atomic(self.directory / POINTER, final.name + "\n")  # the commit point
        _fsync_dir(self.directory)
        self._prune(keep=final)
        return final

    def _prune(self, keep: Path) -> None:
        found = self.checkpoints()
        survivors = {p for _, p in found[-self.keep_last:]} | {keep}
        for _, path in found:
            if path not in survivors:
                shutil.rmtree(path, ignore_errors=True)

    def _remove_stale_temporaries(self) -> None:
        """Temporary folders of crashed saves (their process is gone) and temporary
        pointer files of a save killed while moving the pointer."""
        for child in self.directory.iterdir():
            if child.name.startswith(f".{POINTER}.") and child.name.endswith(".tmp") and child.is_file():
                child.unlink(missing_ok=True)  # one writer at a time: nobody else is writing it
                continue
            if not child.name.startswith(_TMP_PREFIX) or not child.is_dir():
                continue
            pid = child.name.rsplit("-", 1)[-1]
            if pid.isdigit() and int(pid) != os.getpid() and pid_alive(int(pid)):
                continue  # another live writer (not supported, but do not break it)
            shutil.rmtree(child, ignore_errors=True)

    # -- loading --------------------------------------------------------------------------------

    def verify(self, path: str | Path) -> dict[str, Any]:
        """Check a checkpoint folder's files against its meta.json; returns the meta.
        Raises CheckpointError naming the file and the problem."""
        path = Path(path)
        if not path.is_dir():
            raise CheckpointError(f"{path}: checkpoint folder is missing")
        meta_path = path / META
        if not meta_path.is_file():
            raise CheckpointError(f"{meta_path}: missing (the checkpoint is incomplete)")
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            claimed = meta.pop("meta_sha256")
        except (ValueError, KeyError, AttributeError, UnicodeDecodeError) as err:
            raise CheckpointError(f"{meta_path}: unreadable or truncated ({type(err).__name__}: {err})") from None
        if hashlib.sha256(_canonical(meta).encode()).hexdigest() != claimed:
            raise CheckpointError(f"{meta_path}: content does not match its own sha256 (corrupted)")
        if meta.get("format_version") != FORMAT_VERSION:
            raise CheckpointError(f"{meta_path}: format_version {meta.get('format_version')!r}, "
                                  f"this code reads {FORMAT_VERSION}")
        for name in FILES:
            file = path / name
            expected = meta["files"][name]
            if not file.is_file():
                raise CheckpointError(f"{file}: missing")
            size = file.stat().st_size
            if size != expected["bytes"]:
                kind = "truncated" if size < expected["bytes"] else "longer than written"
                raise CheckpointError(f"{file}: {kind} ({size} bytes, {expected['bytes']} expected)")
            actual = sha256_file(file)
            if actual != expected["sha256"]:
                raise CheckpointError(f"{file}: sha256 mismatch (file {actual[:12]}..., "
                                      f"recorded {expected['sha256'][:12]}...): the file is corrupted")
        return meta

    def _newest_good(self, excluding: Path) -> Path | None:
        for _, candidate in reversed(self.checkpoints()):
            if candidate == excluding:
                continue
            try:
                self.verify(candidate)
            except CheckpointError:
                continue
            return candidate
        return None

    def load(self, path: str | Path | None = None, expected_metadata: Mapping[str, Any] | None = None
             ) -> tuple[int, dict[str, torch.Tensor], dict[str, Any], dict[str, Any]]:
        """(step, tensors, state, metadata) of ``path`` (default: the latest).

        ``expected_metadata``: every key given (nested dicts compared key by key)
        must equal the checkpoint's; otherwise CheckpointError lists the keys.
        """
        explicit = path is not None
        target = Path(path) if explicit else self.latest()
        if target is None:
            raise CheckpointError(f"{self.directory}: no checkpoint found")
        try:
            meta = self.verify(target)
            from safetensors.torch import load_file

            tensors = self._read(target / FILES[0], lambda f: load_file(str(f)))
            state = self._read(target / FILES[1],
                               lambda f: torch.load(f, map_location="cpu", weights_only=True))
        except CheckpointError as err:
            if explicit:
                raise
            good = self._newest_good(excluding=target)
            hint = (f"the previous good checkpoint is {good} (load it with load(path=...))" if good
                    else "no other intact checkpoint exists in this folder")
            raise CheckpointError(f"the latest checkpoint {target} is damaged: {err}; {hint}") from None
        metadata = meta["metadata"]
        if expected_metadata is not None:
            differences = metadata_differences(metadata, expected_metadata)
            if differences:
                raise CheckpointError(f"{target / META}: metadata does not match this run at "
                                      f"{len(differences)} key(s): " + "; ".join(differences))
        return int(meta["step"]), tensors, state, metadata

    @staticmethod
    def _read(file: Path, reader: Any) -> Any:
        try:
            return reader(file)
        except Exception as err:  # hash matched but the library refuses it (e.g. another version)
            raise CheckpointError(f"{file}: cannot be read ({type(err).__name__}: {err})") from None


def metadata_differences(stored: Mapping[str, Any], expected: Mapping[str, Any]) -> list[str]:
    """Human-readable differences at the dotted keys of ``expected``."""
    have = flatten(stored)
    expected = json.loads(json.dumps(dict(expected)))  # as stored: tuples become lists
    problems = []
    for key, want in sorted(flatten(expected).items()):
        if key not in have:
            problems.append(f"{key}: missing in the checkpoint (expected {want!r})")
        elif have[key] != want:
            problems.append(f"{key}: checkpoint has {have[key]!r}, expected {want!r}")
    return problems


# -- helpers for what a trainer stores ---------------------------------------------------------

def capture_rng(numpy: np.random.Generator | None = None, torch_generator: torch.Generator | None = None,
                python: random.Random | None = None) -> dict[str, Any]:
    """RNG states as weights-only-safe values (numpy's is a dict of str/int)."""
    out: dict[str, Any] = {}
    if numpy is not None:
        out["numpy"] = numpy.bit_generator.state
    if torch_generator is not None:
        out["torch"] = torch_generator.get_state()
    if python is not None:
        out["python"] = python.getstate()
    return out


def restore_rng(states: Mapping[str, Any], numpy: np.random.Generator | None = None,
                torch_generator: torch.Generator | None = None, python: random.Random | None = None) -> None:
    """Inverse of ``capture_rng``: set each given generator to its stored state."""
    for name, gen in (("numpy", numpy), ("torch", torch_generator), ("python", python)):
        if gen is not None and name not in states:
            raise CheckpointError(f"no {name} RNG state stored (stored: {sorted(states)})")
    if numpy is not None:
        numpy.bit_generator.state = states["numpy"]
    if torch_generator is not None:
        torch_generator.set_state(states["torch"])
    if python is not None:
        python.setstate(_as_tuples(states["python"]))


def _as_tuples(value: Any) -> Any:
    return tuple(_as_tuples(v) for v in value) if isinstance(value, (list, tuple)) else value


WEIGHT_KEYS = ("policy", "reference")
_PRESENT = "weights_present"


def pack_engine_state(engine_state: Mapping[str, Any]) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Split a TrainEngine state_dict for ``save``: the weights ("policy",
    "reference") become safetensors entries "policy/<name>", "reference/<name>";
    the rest (optimizer, counters) stays for the torch file, with a note of
    which weights were present (a reference may be None)."""
    tensors: dict[str, torch.Tensor] = {}
    rest: dict[str, Any] = {_PRESENT: []}
    for key, value in engine_state.items():
        if key in WEIGHT_KEYS:
            if value is not None:
                rest[_PRESENT].append(key)
                tensors.update({f"{key}/{name}": t for name, t in value.items()})
        else:
            rest[key] = value
    return tensors, rest


def unpack_engine_state(tensors: Mapping[str, torch.Tensor], rest: Mapping[str, Any]) -> dict[str, Any]:
    """Inverse of ``pack_engine_state``."""
    state: dict[str, Any] = {k: v for k, v in rest.items() if k != _PRESENT}
    for key in WEIGHT_KEYS:
        state[key] = ({name[len(key) + 1:]: t for name, t in tensors.items() if name.startswith(key + "/")}
                      if key in rest[_PRESENT] else None)
    return state
