"""Resuming ``mage train``: what a checkpoint must match to be continued
(``config_digest``, ``code_digest``), and the output folder a run continues in or
starts afresh in (``checkpoint_to_resume``; ``--resume auto`` moves a run it does not
continue aside, never deletes it).

A finished run is kept as it is, not trained again, when ``--resume auto`` (a DVC re-run)
finds it written under the same params and code, from the same input files, with its outputs
as it wrote them: ``finished.json``, written last, holds its digests and the SHA-256 of each
output. A rerun would write the same bytes (a CPU run is bit-reproducible: docs/learning.md),
so the outputs DVC then records are those its cmd makes from the deps it records, as after a
rerun, without the rerun (DVC's own run cache does the same, but skips persistent outs). Any
doubt (no record, a changed or missing output, other inputs, another iteration count) moves
the run aside and trains afresh, as before."""

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
        why = why_not_kept(checkpoints.directory.parent, cfg, digest, code)
        return f"the run it holds is finished ({cfg.train.iterations} iterations) but {why}" if why else None
    return None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _files(root: Path, names: tuple[str, ...] | list[str]) -> dict[str, str]:
    """SHA-256 of every file of ``names`` under ``root`` (a folder counts by each file in it),
    by path relative to ``root``; a missing name is "missing"."""
    found: dict[str, str] = {}
    for name in names:
        path = root / name
        if path.is_dir():
            for item in sorted(p for p in path.rglob("*") if p.is_file()):
                found[item.relative_to(root).as_posix()] = _sha256(item)
        else:
            found[name] = _sha256(path) if path.is_file() else "missing"
    return found


def input_paths(cfg: Config) -> list[Path]:
    """The files a run reads besides params and ``mage_core`` (the DVC deps the digests leave out):
    its task's data folder, its warm start, a local model."""
    from mage_core.envs.registry import task

    env = cfg.env.name
    paths = [Path(getattr(cfg.env, env).data_path)] if task(env).data is not None else []
    if cfg.init_model() is not None:
        paths.append(Path(str(cfg.init_model())))
    if cfg.model.source == "local" and cfg.model.path:
        paths.append(Path(cfg.model.path))
    return paths


def inputs_digest(cfg: Config) -> str:
    """The contents of ``input_paths``: a finished run is kept only for the same input files."""
    digest = hashlib.sha256()
    for path in input_paths(cfg):
        files = _files(path.parent, [path.name]) if path.exists() else {str(path): "missing"}
        digest.update(json.dumps([str(path), files], sort_keys=True).encode())
    return digest.hexdigest()[:16]


def finished_record(out_dir: Path, cfg: Config, digest: str, code: str) -> dict[str, Any]:
    """What ``finished.json`` holds for the run in ``out_dir``: its digests, iterations and outputs."""
    return {"iterations": cfg.train.iterations, "config_digest": digest, "code_digest": code,
            "inputs_digest": inputs_digest(cfg), "outputs": _files(out_dir, list(RECORDED_OUTPUTS))}


def write_finished(out_dir: Path, cfg: Config, digest: str, code: str) -> None:
    """``finished.json``: written last, once every output of the run is whole."""
    from mage_core.io.atomic import write_json_atomic

    write_json_atomic(out_dir / FINISHED, finished_record(out_dir, cfg, digest, code))


def why_not_kept(out_dir: Path, cfg: Config, digest: str, code: str) -> str | None:
    """Why the finished run in ``out_dir`` is not kept as it is (None: it is): no ``finished.json``
    (the run predates it, or did not finish its outputs), another iteration count, other input
    files, or an output that changed or went since it was written."""
    try:
        record = json.loads((out_dir / FINISHED).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return f"holds no {FINISHED} vouching for its outputs"
    if not isinstance(record, dict) or not isinstance(record.get("outputs"), dict):
        return f"its {FINISHED} cannot be read"
    if record.get("iterations") != cfg.train.iterations:
        return f"it ran {record.get('iterations')} iterations, not {cfg.train.iterations}"
    if record.get("config_digest") != digest or record.get("code_digest") != code:
        return f"its {FINISHED} names other params or code"
    if record.get("inputs_digest") != inputs_digest(cfg):
        return "its input files changed since (" + ", ".join(str(p) for p in input_paths(cfg)) + ")"
    now = _files(out_dir, list(RECORDED_OUTPUTS))
    changed = sorted(name for name in record["outputs"].keys() | now.keys()
                     if record["outputs"].get(name) != now.get(name))
    if changed:
        return f"its outputs changed since it wrote them ({', '.join(changed[:3])}{' ...' if len(changed) > 3 else ''})"
    return None


#: ``checkpoint_to_resume``'s answer for a finished run kept as it is: nothing to train.
KEPT = "kept"


#: What a finished run writes last: its digests and the SHA-256 of each of ``RECORDED_OUTPUTS``.
FINISHED = "finished.json"
#: The outputs ``finished.json`` vouches for (files, or folders whose every file counts).
RECORDED_OUTPUTS = ("best", "metrics.jsonl", "summary.json", "transcripts.txt")
#: What a run writes under its output folder; ``--resume auto`` moves these aside together.
RUN_OUTPUTS = ("checkpoints", "policy-init", "best", "metrics.jsonl", "summary.json", "transcripts.txt", FINISHED)
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


def _finished(checkpoints: CheckpointManager, latest: Path, cfg: Config) -> bool:
    try:
        return int(checkpoints.verify(latest)["step"]) >= cfg.train.iterations
    except CheckpointError:
        return False


def _prepare_out_dir(out_dir: Path, checkpoints: CheckpointManager, resume: bool | Literal["auto"], digest: str,
                     code: str, cfg: Config) -> Path | str | None:
    """Rank 0's preparation of ``out_dir``: the checkpoint to resume (or None, or ``KEPT``
    for a finished run kept as it is), the outputs of a run that must not be continued
    moved aside (never deleted), the tracking store checked."""
    check_out_dir(out_dir)
    latest = checkpoints.latest()
    why = _not_resumable(checkpoints, latest, cfg, digest, code) if resume == "auto" else None
    if why is None and resume == "auto" and latest is not None and _finished(checkpoints, latest, cfg):
        console.print(f"{out_dir}: the run it holds finished with these params, code and input files, and its "
                      f"outputs are as it wrote them ({FINISHED}): kept, nothing trained again (a rerun would write "
                      f"the same bytes; move {out_dir} away to train afresh)", soft_wrap=True, highlight=False,
                      markup=False)
        return KEPT
    if why is not None:
        # A pipeline re-run (DVC) after a change of params or code, or of a finished run
        # whose outputs DVC wants again: the old run is not continued, but kept.
        moved = move_aside(out_dir)
        console.print(f"{out_dir}: {why}; moved the old run to {moved} (delete it when no longer needed) "
                      "and starting afresh", soft_wrap=True, highlight=False, markup=False)
        latest = None
    elif latest is None:
        # Nothing to continue, so nothing of an earlier run may be read: above all its
        # policy-init/, which build_policy would load instead of building this run's (a run that
        # trains nothing writes no checkpoint, so this is how a baseline's folder is renewed after
        # its warm start or the code changed). Moved aside, never deleted.
        moved = move_aside(out_dir)
        if moved is not None:
            console.print(f"{out_dir}: no checkpoint to continue; moved the earlier run's outputs to {moved} "
                          "(delete it when no longer needed) and starting afresh", soft_wrap=True,
                          highlight=False, markup=False)
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
                         code: str, cfg: Config, ranks: Ranks) -> Path | str | None:
    """The checkpoint every rank resumes from, None, or ``KEPT`` (a finished run kept as it is:
    nothing to do): rank 0 prepares ``out_dir`` (``_prepare_out_dir``) and the other ranks take
    its answer, or stop with its error."""
    problem, latest = None, None
    if ranks.main:
        try:
            latest = _prepare_out_dir(out_dir, checkpoints, resume, digest, code, cfg)
        except ConfigError as err:
            problem = (err.source, err.problems)
    problem = ranks.broadcast(problem)  # every rank stops with rank 0's error
    if problem is not None:
        raise ConfigError(*problem)
    answer = latest.name if isinstance(latest, Path) else latest
    latest_name = ranks.broadcast(answer if ranks.main else None)
    if latest_name == KEPT:
        return KEPT
    return checkpoints.directory / latest_name if latest_name is not None else None
