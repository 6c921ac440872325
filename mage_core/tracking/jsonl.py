"""A plain JSON-lines metric log, one object per step.

Keys follow ``<phase>/<group>/<name>`` (docs/architecture.md, style rule 8), identical to
what MLflow will record, timings excepted: the log is a DVC-cached output of the
train stage, and a wall-clock figure in it would change its hash on every run of
the same seeded training. Every key under ``train/time/`` or ``eval/time/``
(``TIMING_PREFIXES``; also behind the ``final/`` prefix of the post-training
evaluation) is a timing: it goes to MLflow and the console, never to this log.
On resume the log is cut back to the checkpoint's step, so a resumed run's log
reads exactly like an uninterrupted one.

The first line is the run's params record (``{"params": {...}}``: every setting, flat).
A run resumed with a setting that cannot change its results changed (``tracking.*``,
checkpoint spacing...: ``RESUME_INDEPENDENT_KEYS``) gets a second params record, with
every setting as it is from then on and the step it was resumed after
(``{"params": {...}, "resumed_after_step": N}``), so the log never claims the old value
for the whole run; the last params record holds the settings in force at the end.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Mapping, Protocol


class MetricLogger(Protocol):
    def log_params(self, params: Mapping[str, Any]) -> None: ...

    def log_metrics(self, step: int, metrics: Mapping[str, float]) -> None: ...

    def close(self) -> None: ...


#: The key of a params record written at a resume: the step the run was resumed after.
RESUMED_AFTER = "resumed_after_step"
#: Metric-key prefixes of wall-clock measurements (seconds, rates): MLflow and the console only.
TIMING_PREFIXES = ("train/time/", "eval/time/")


def is_timing(key: str) -> bool:
    """A wall-clock key (``TIMING_PREFIXES``), with or without the ``final/`` prefix."""
    return key.removeprefix("final/").startswith(TIMING_PREFIXES)


def without_timings(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """``metrics`` minus its timings: what a cached output may hold."""
    return {key: value for key, value in metrics.items() if not is_timing(key)}


def _clean(value: float) -> float | None:
    return value if math.isfinite(value) else None  # JSON has no NaN


class JsonlLogger:
    def __init__(self, path: str | Path, resume_from_step: int | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if resume_from_step is not None:
            self.truncate_after(resume_from_step)
        elif self.path.exists():
            self.path.unlink()
        self._fh = self.path.open("a", encoding="utf-8")

    def truncate_after(self, step: int) -> None:
        """Keep only records of steps <= ``step``: the run's params record, and a later one
        only if written at a resume before ``step`` (the steps it describes are kept)."""
        if not self.path.exists():
            return
        kept = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by a crash
            if "params" in record:
                if record.get(RESUMED_AFTER, -1) < step:
                    kept.append(line)
            elif record.get("step") is None or record["step"] <= step:
                kept.append(line)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text("".join(k + "\n" for k in kept), encoding="utf-8")
        os.replace(tmp, self.path)

    def log_params(self, params: Mapping[str, Any]) -> None:
        self._write({"params": dict(params)})

    def log_resumed_params(self, params: Mapping[str, Any], step: int) -> bool:
        """On a resume after ``step``: a params record of ``params`` if they differ from the
        last one the log holds (module docstring); whether one was written."""
        current = json.loads(json.dumps(dict(params)))  # as the log stores them (tuples become lists)
        last = None
        if self.path.exists():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(record, dict) and "params" in record:
                    last = record["params"]
        if last == current:
            return False
        self._write({"params": current, RESUMED_AFTER: step})
        return True

    def log_metrics(self, step: int, metrics: Mapping[str, float]) -> None:
        """One record of ``step`` without the timings; nothing when only timings were given."""
        kept = without_timings(metrics)
        if kept:
            self._write({"step": step, **{k: _clean(float(v)) for k, v in kept.items()}})

    def _write(self, record: Mapping[str, Any]) -> None:
        self._fh.write(json.dumps(record, sort_keys=True) + "\n")
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
