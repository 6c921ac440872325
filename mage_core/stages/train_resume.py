"""Resuming ``mage train``: what a checkpoint must match to be continued
(``config_digest``, ``code_digest``), and the output folder a run continues in or
starts afresh in (``checkpoint_to_resume``; ``--resume auto`` moves a run it does not
continue aside, never deletes it)."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any, Literal

from rich.console import Console

from mage_core.config import Config, ConfigError
from mage_core.io.atomic import check_writable, writable_problem
from mage_core.io.dotted import flatten
from mage_core.tracking.runs import check_tracking
from mage_core.trainers.checkpoint import CheckpointError, CheckpointManager
from mage_core.trainers.data_parallel import Ranks

console = Console()


#: Settings a checkpoint may be resumed under whatever their values: left out of the
#: config digest (and of the configuration a checkpoint stores), so changing one neither
#: stops ``--resume`` nor makes ``--resume auto`` start afresh. Dotted keys or whole sections.
RESUME_INDEPENDENT_KEYS: dict[str, str] = {
    # Cannot change any output (metrics.jsonl, best/, summary.json, the checkpoints' contents):
    "tracking": "MLflow on/off, experiment, system metrics, model registration: where the run is also "
                "recorded, never what it computes",
    "train.output_dir": "where the outputs go (--out wins), not what they hold",
    "train.keep_checkpoints": "how many old checkpoints are kept on disk; the run never reads them back",
    "train.checkpoint_every": "when the state is saved; saving reads no random number and changes no state",
    "rollout.workers": "where rollouts run (in-process or on Ray workers): the same meta-episodes either way",
    "rollout.ray_address": "which Ray cluster runs the rollout workers (as rollout.workers)",
    # The data-parallel ranks play and average the same batch: a run may resume on another
    # count where the engine's state allows it (DeepSpeedEngine.load_state_dict says when not).
    "backend.ranks": "how many processes share the same batch",
    "tournament": "read by `mage tournament` only",
    "reproduce": "read by the pipeline; a run's own values (reproduce.iterations, its set) reach training "
                 "through the train/env/algorithm keys they resolve to",
    "sweep": "read by `mage sweep` only; a point's values reach training through the keys they set",
    # Run length: stopping on a time budget changes where the run ends, not what each
    # iteration computes. (train.iterations is not here: the learning-rate and entropy
    # schedules run over it, see SCHEDULE_FREE_KEYS.)
    "train.time_budget_minutes": "when the run stops, not what each iteration computes",
    # Not here, although they look like bookkeeping: train.eval_every (which policies are
    # evaluated, so which one becomes best/), train.num_threads (CPU reductions in another order).
}


#: Left out as well when neither schedule depends on the run's length (train.lr_schedule
#: constant and train.entropy_coef_final equal to train.entropy_coef): a run may then be
#: continued for longer than it was started for.
SCHEDULE_FREE_KEYS = ("train.iterations",)


def resume_config(cfg: Config) -> dict[str, Any]:
    """The configuration a checkpoint must have been written under to be resumed: all
    of it but ``RESUME_INDEPENDENT_KEYS`` (stored in every checkpoint, compared on resume)."""
    data = cfg.model_dump(mode="json")
    t = cfg.train
    schedule_free = t.lr_schedule == "constant" and t.entropy_coef_final == t.entropy_coef
    for key in (*RESUME_INDEPENDENT_KEYS, *(SCHEDULE_FREE_KEYS if schedule_free else ())):
        *path, last = key.split(".")
        section = data
        for part in path:
            section = section.get(part, {})
        section.pop(last, None)
    return json.loads(json.dumps(data))  # as a checkpoint's JSON stores it (tuples become lists)


def config_digest(cfg: Config) -> str:
    """What must match for a checkpoint to be resumed: the digest of ``resume_config``."""
    return hashlib.sha256(json.dumps(resume_config(cfg), sort_keys=True).encode()).hexdigest()[:16]


def config_differences(stored: dict[str, Any], current: dict[str, Any], limit: int = 5) -> str:
    """The dotted keys where ``stored`` (a checkpoint's ``resume_config``) and ``current``
    differ, with both values, on one line: the first ``limit``, then how many more."""
    old, new = flatten(stored), flatten(current)
    absent = object()
    lines = []
    for key in sorted(old.keys() | new.keys()):
        was, now = old.get(key, absent), new.get(key, absent)
        if was != now:
            lines.append(f"{key}: {'absent' if was is absent else json.dumps(was)} in the checkpoint, "
                         f"{'absent' if now is absent else json.dumps(now)} now")
    more = len(lines) - limit
    return "; ".join(lines[:limit]) + (f"; and {more} more" if more > 0 else "")


def code_digest() -> str:
    """The source of the installed ``mage_core`` package (every .py file, by relative
    path): a run resumed by ``--resume auto`` must have been written by the same code."""
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _mismatch(checkpoints: CheckpointManager, latest: Path | None, cfg: Config, digest: str) -> str | None:
    """How the configuration ``latest`` was written under differs from ``cfg`` (the
    differing keys with both values, on one line), or None when it matches or cannot
    be read (a damaged checkpoint is not judged here: loading it reports the damage)."""
    if latest is None:
        return None
    try:
        metadata = checkpoints.verify(latest)["metadata"]
    except CheckpointError:
        return None
    if metadata.get("config_digest") == digest:
        return None
    if not isinstance(metadata.get("config"), dict):
        return ("its config digest differs from this run's (the checkpoint predates the listing of "
                "the differing keys)")
    return "differs at " + config_differences(metadata["config"], resume_config(cfg))


def _not_resumable(checkpoints: CheckpointManager, latest: Path | None, cfg: Config, digest: str,
                   code: str) -> str | None:
    """Why ``--resume auto`` must not continue ``latest``, or None when it should: only
    an unfinished run of the same configuration and the same code is continued (what
    a crashed or killed stage leaves). A damaged checkpoint is not judged here:
    loading it reports the damage."""
    if latest is None:
        return None
    try:
        meta = checkpoints.verify(latest)
    except CheckpointError:
        return None
    mismatch = _mismatch(checkpoints, latest, cfg, digest)
    if mismatch is not None:
        return f"the configuration of {latest.name} {mismatch}"
    if meta["metadata"].get("code_digest") != code:
        return "the checkpoints were written by other code (mage_core changed)"
    if int(meta["step"]) >= cfg.train.iterations:
        return f"the run it holds is finished ({cfg.train.iterations} iterations)"
    return None


#: What a run writes under its output folder; ``--resume auto`` moves these aside together.
RUN_OUTPUTS = ("checkpoints", "policy-init", "best", "metrics.jsonl", "summary.json", "transcripts.txt")
#: Where ``--resume auto`` moves a run it does not continue: ``<out>/superseded/<UTC time>/``.
SUPERSEDED = "superseded"


def move_aside(out_dir: Path) -> Path | None:
    """Move a previous run's outputs (``RUN_OUTPUTS``) into a new folder
    ``<out_dir>/superseded/<UTC time>/`` and return it (None when there was nothing to
    move). Nothing is deleted: the user removes the folder when it is no longer needed."""
    present = [name for name in RUN_OUTPUTS if (out_dir / name).exists()]
    if not present:
        return None
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target, n = out_dir / SUPERSEDED / stamp, 1
    while target.exists():
        n += 1
        target = out_dir / SUPERSEDED / f"{stamp}-{n}"
    target.mkdir(parents=True)
    for name in present:
        os.rename(out_dir / name, target / name)  # same file system: nothing is copied
    return target


def check_out_dir(out_dir: Path) -> None:
    """``--out`` made (with its parents) and written to before any work: a folder that
    cannot be written stops the run now, in one line, not at its first checkpoint."""
    try:
        check_writable(out_dir)
    except OSError as err:
        raise ConfigError("command line", [f"--out: {out_dir}: {writable_problem(err)}"]) from None


def _prepare_out_dir(out_dir: Path, checkpoints: CheckpointManager, resume: bool | Literal["auto"], digest: str,
                     code: str, cfg: Config) -> Path | None:
    """Rank 0's preparation of ``out_dir``: the checkpoint to resume (or None), the
    outputs of a run that must not be continued moved aside (never deleted), the
    tracking store checked."""
    check_out_dir(out_dir)
    latest = checkpoints.latest()
    why = _not_resumable(checkpoints, latest, cfg, digest, code) if resume == "auto" else None
    if why is not None:
        # A pipeline re-run (DVC) after a change of params or code, or of a finished run
        # whose outputs DVC wants again: the old run is not continued, but kept.
        moved = move_aside(out_dir)
        console.print(f"{out_dir}: {why}; moved the old run to {moved} (delete it when no longer needed) "
                      "and starting afresh", soft_wrap=True, highlight=False, markup=False)
        latest = None
    if latest is not None and resume is True:
        mismatch = _mismatch(checkpoints, latest, cfg, digest)
        if mismatch is not None:
            raise ConfigError("--resume", [
                f"{latest} was written under another configuration: it {mismatch}; nothing was changed. "
                f"Resume it with the settings it was written under, or start over with --resume auto (it "
                f"moves the old run to {out_dir / SUPERSEDED}/) or another --out"])
    if latest is not None and not resume:
        raise ConfigError("command line", [
            f"--out: {out_dir} already holds checkpoints (latest {latest.name}); pass --resume to continue it "
            "or choose another --out"])
    if cfg.tracking.mlflow:
        check_tracking(Path.cwd())  # an unreachable tracking server fails now, before any work
    return latest


def checkpoint_to_resume(out_dir: Path, checkpoints: CheckpointManager, resume: bool | Literal["auto"], digest: str,
                         code: str, cfg: Config, ranks: Ranks) -> Path | None:
    """The checkpoint every rank resumes from, or None: rank 0 prepares ``out_dir``
    (``_prepare_out_dir``) and the other ranks take its answer, or stop with its error."""
    problem, latest = None, None
    if ranks.main:
        try:
            latest = _prepare_out_dir(out_dir, checkpoints, resume, digest, code, cfg)
        except ConfigError as err:
            problem = (err.source, err.problems)
    problem = ranks.broadcast(problem)  # every rank stops with rank 0's error
    if problem is not None:
        raise ConfigError(*problem)
    latest_name = ranks.broadcast(latest.name if ranks.main and latest is not None else None)
    return checkpoints.directory / latest_name if latest_name is not None else None
