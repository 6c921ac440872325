"""An MLflow run's metrics, params and tags, sent from a background thread: tracking never
stops or stalls training (docs/faults.md, "The tracking server goes away").

``Outbox`` wraps an ``MlflowTracker``: ``log_metrics`` / ``log_params`` / ``set_tags`` queue
the call and return at once; a daemon thread sends the queue in order. When the store cannot
be reached (a killed server, a network outage), the item stays first in the queue and is
retried with back-off (1 s doubling to 30 s) while training goes on; one line says so when it
starts and one when the store answers again. An answer that refuses the item itself (an MLflow
error code in ``REFUSALS``: a bad value, a param written twice) drops that item with one line, since
retrying cannot help. ``close`` sends what is left within ``flush_timeout_s`` and then ends the
run; if the store is still away it says in one line how many calls were not recorded (every
metric is also in the stage's ``metrics.jsonl``) and leaves the run RUNNING, for the next
start in this store to mark KILLED (``mlflow_tracker.end_dead_runs``).
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from typing import Any, Callable, Mapping

#: Back-off between two attempts while the store is away: 1 s, doubling, at most this.
MAX_RETRY_DELAY_S = 30.0
#: MLflow error codes of a store that answered and refused the item itself (dropped, not retried).
REFUSALS = frozenset({"INVALID_PARAMETER_VALUE", "RESOURCE_ALREADY_EXISTS", "RESOURCE_DOES_NOT_EXIST",
                      "INVALID_STATE", "BAD_REQUEST", "PERMISSION_DENIED", "RESOURCE_LIMIT_EXCEEDED"})


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _one_line(err: BaseException, limit: int = 200) -> str:
    text = " ".join(str(err).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Outbox:
    """``MetricLogger`` for an ``MlflowTracker`` whose calls never wait for the store."""

    def __init__(self, run: Any, *, flush_timeout_s: float = 60.0, warn: Callable[[str], None] = _stderr) -> None:
        self.run = run
        self.flush_timeout_s = flush_timeout_s
        self._warn = warn
        self._queue: deque[tuple[str, Any]] = deque()
        self._cond = threading.Condition()
        self._closing = False
        self._busy = False  # the worker holds an item it is sending
        self._down_since: float | None = None
        self.unsent = 0
        self._thread = threading.Thread(target=self._work, name="mlflow-outbox", daemon=True)
        self._thread.start()

    # -- MetricLogger ------------------------------------------------------------------------
    def log_params(self, params: Mapping[str, Any]) -> None:
        self._put("log_params", dict(params))

    def log_metrics(self, step: int, metrics: Mapping[str, float]) -> None:
        self._put("log_metrics", (step, dict(metrics)))

    def set_tags(self, tags: Mapping[str, str]) -> None:
        self._put("set_tags", dict(tags))

    @property
    def run_id(self) -> str:
        return str(self.run.run_id)

    @property
    def tracking_uri(self) -> str:
        return str(self.run.tracking_uri)

    def log_artifact(self, path: Any, artifact_path: str | None = None) -> None:
        self._direct("log_artifact", path, artifact_path)

    def log_artifacts(self, directory: Any, artifact_path: str | None = None) -> None:
        self._direct("log_artifacts", directory, artifact_path)

    def _direct(self, method: str, *args: Any) -> None:
        """An artifact upload, after the queue; skipped with one line while the store is away."""
        if not self.drain(self.flush_timeout_s):
            self._warn(f"MLflow at {self.tracking_uri} is unreachable: {method} {args[0]} skipped")
            return
        try:
            getattr(self.run, method)(*args)
        except Exception as err:  # noqa: BLE001
            self._warn(f"MLflow at {self.tracking_uri}: {method} {args[0]} failed ({_one_line(err)}); skipped")

    @property
    def away(self) -> bool:
        """Whether the store did not answer the last attempt (and has not answered since)."""
        return self._down_since is not None

    def __getattr__(self, name: str) -> Any:
        # Everything else (registration, tags(), the comparison views) goes to the run directly, after
        # what is queued, so that it sees the run as the queue left it; with the store away, at once
        # TrackingUnavailable, which the stages turn into one line (never a wait and a traceback).
        if name.startswith("_"):
            raise AttributeError(name)
        if self.away or not self.drain(self.flush_timeout_s):
            from mage_core.tracking.mlflow_tracker import TrackingUnavailable

            raise TrackingUnavailable(f"MLflow at {self.tracking_uri} is unreachable ({name} skipped)")
        return getattr(self.run, name)

    def extra(self, what: str, action: Any) -> None:
        """Run ``action()`` (a registration, the comparison views: calls straight to the store) unless
        the store is away or fails it: then one line, and the stage goes on."""
        try:
            action()
        except Exception as err:  # noqa: BLE001  (whatever the store or the network raised)
            self._warn(f"MLflow at {self.tracking_uri}: {what} skipped ({_one_line(err)})")

    def _put(self, method: str, payload: Any) -> None:
        with self._cond:
            if self._closing:
                raise RuntimeError("the MLflow outbox is closed")
            self._queue.append((method, payload))
            self._cond.notify_all()

    # -- the sending thread ------------------------------------------------------------------
    def _send(self, method: str, payload: Any) -> None:
        if method == "log_metrics":
            self.run.log_metrics(*payload)
        else:
            getattr(self.run, method)(payload)

    def _work(self) -> None:
        from mlflow.exceptions import MlflowException

        delay = 1.0
        while True:
            with self._cond:
                while not self._queue and not self._closing:
                    self._cond.wait()
                if not self._queue:
                    return
                method, payload = self._queue[0]
                self._busy = True
            try:
                self._send(method, payload)
            except Exception as err:  # noqa: BLE001  (whatever the store or the network raised)
                transient = isinstance(err, OSError) or (isinstance(err, MlflowException)
                                                         and err.error_code not in REFUSALS)
                if not transient:
                    # The store answered and refused this item (a bad value, a param written twice), or
                    # the item itself is bad: retrying cannot help, and it must not block the queue.
                    self._say(f"MLflow refused {method} for run {self.run.run_id}: {_one_line(err)} (dropped; "
                              "metrics.jsonl has the metrics)")
                    self._done()
                    continue
                first = False
                with self._cond:  # unreachable or failing store: keep the item and retry
                    self._busy = False
                    if self._down_since is None:
                        self._down_since = time.monotonic()
                        first = True
                if first:
                    self._say(f"MLflow at {self.run.tracking_uri} is unreachable ({_one_line(err)}); training "
                              "goes on, its metrics wait in memory and are retried (metrics.jsonl has them all)")
                with self._cond:
                    self._cond.wait(timeout=delay)  # a close() wakes it early to try once more
                delay = min(2 * delay, MAX_RETRY_DELAY_S)
            else:
                if self._down_since is not None:
                    self._say(f"MLflow at {self.run.tracking_uri} answers again after "
                              f"{time.monotonic() - self._down_since:.0f} s; {len(self._queue) - 1} queued call(s) "
                              "follow")
                    self._down_since = None
                delay = 1.0
                self._done()

    def _say(self, line: str) -> None:
        """One line from the sending thread; a failing stderr must not end the thread."""
        try:
            self._warn(line)
        except Exception:  # noqa: BLE001,S110  (e.g. a closed pipe: the line is lost, the queue goes on)
            pass

    def _done(self) -> None:
        with self._cond:
            if self._queue:  # a close() that gave up on the store has emptied it meanwhile
                self._queue.popleft()
            self._busy = False
            self._cond.notify_all()

    def __enter__(self) -> Outbox:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close("FINISHED")
        else:
            self.close("KILLED" if issubclass(exc_type, KeyboardInterrupt) else "FAILED")

    # -- ending --------------------------------------------------------------------------------
    def drain(self, timeout_s: float) -> bool:
        """Wait until everything queued is sent; whether it was. Gives up after ``timeout_s``
        without progress (a store that answers works through any backlog)."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            pending = len(self._queue)
            while self._queue:
                if len(self._queue) < pending:  # progress: the store answers
                    pending, deadline = len(self._queue), time.monotonic() + timeout_s
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.notify_all()
                self._cond.wait(timeout=min(left, 1.0))
        return True

    def close(self, status: str = "FINISHED") -> None:
        """Send what is queued (at most ``flush_timeout_s``), then end the run with ``status``.
        If the store stays away, one line says what was not recorded and the run is left as it
        is (RUNNING; the next run started in this store marks it KILLED)."""
        sent = self.drain(self.flush_timeout_s)
        with self._cond:
            self._closing = True
            self.unsent = len(self._queue)
            self._queue.clear()
            self._cond.notify_all()
        if not sent:
            self._warn(f"MLflow at {self.run.tracking_uri} did not answer within {self.flush_timeout_s:.0f} s "
                       f"(tracking.flush_timeout_s): {self.unsent} call(s) of run {self.run.run_id} not recorded "
                       "(the stage's metrics.jsonl has every metric); the run is left RUNNING")
            self.run.stop_system_metrics(publish=False)
            return
        try:
            self.run.close(status)
        except Exception as err:  # noqa: BLE001  (the store went away between the flush and the end)
            self._warn(f"MLflow at {self.run.tracking_uri}: could not end run {self.run.run_id} "
                       f"({_one_line(err)}); it is left RUNNING")
