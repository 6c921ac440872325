"""Where an output came from, and whether the committed lineage still describes the code.

A report is only as trustworthy as the claim that the committed code produced it.
Three facts answer that claim (CONTRIBUTING.md, "Lineage"):

- ``git_state``: the commit of the checkout and whether tracked files differ from it
  (``git describe --dirty``'s rule: untracked files do not count), leaving out what the
  pipeline itself rewrites while it runs (``PIPELINE_WRITES``: dvc.lock, reports/), so a
  reproduction in a clean checkout is not "dirty" by the time its report is written;
- ``lock_digest``: a SHA-256 over the outputs dvc.lock records (path and hash) for every
  stage but the ones named (the report's own entry is written after the report, so the
  report states the digest of the outputs it was made from: the data, training and
  evaluation stages'); canonical JSON of the parsed lock, so YAML layout does not change it.
  A stage rerun for a change of its code that writes the same bytes (a comment, a moved
  function) leaves the digest, and so the report, standing: DVC does not rerun the report then
  either (issue 40: a change reruns only what it touches);
- ``stale_deps``: the code and params dependencies whose hash in dvc.lock no longer
  matches the working tree, from ``dvc status --json``. Only dependencies git tracks
  count (``mage_core``, ``params.yaml`` sections, ...): a dependency that is another
  stage's output (``data/webshop``, ``artifacts/eval``) is absent from a fresh clone
  by design, as are outputs not in the DVC cache.

No MLflow, no DVC import: DVC runs as a subprocess (its import costs seconds).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

#: dvc.lock entries the report's digest leaves out: the report's own (written after it).
REPORT_STAGES = ("report",)
#: Tracked files the pipeline rewrites as it runs (DVC's lock, the reports): a change to
#: them is the run's output, not a change of the code that made it.
PIPELINE_WRITES = ("dvc.lock", "reports")


@dataclass(frozen=True)
class GitState:
    """The checkout's commit (None: not a git checkout) and whether tracked files changed."""

    commit: str | None
    dirty: bool | None

    def describe(self) -> str:
        if self.commit is None:
            return "no git commit (not a git checkout)"
        state = {True: "with uncommitted changes to tracked files", False: "clean",
                 None: "state of tracked files unknown"}[self.dirty]
        return f"`{self.commit}` ({state})"


def _git(project_dir: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=project_dir, capture_output=True, text=True, timeout=60,
                              check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def git_state(project_dir: Path, ignore: Sequence[str] = PIPELINE_WRITES) -> GitState:
    """The commit of ``project_dir``'s checkout and whether tracked files other than
    ``ignore`` (paths relative to it) differ from it."""
    head = _git(Path(project_dir), "rev-parse", "HEAD")
    if not head:
        return GitState(None, None)
    status = _git(Path(project_dir), "status", "--porcelain", "--untracked-files=no", "--", ".",
                  *(f":(exclude){path}" for path in ignore))
    return GitState(head.strip(), None if status is None else bool(status.strip()))


#: What to do about a dvc.lock that cannot be read (every message about one ends with it).
LOCK_FIX = "restore the committed one (`git checkout -- dvc.lock`) or rerun the pipeline (`make run`)"


def lock_stages(lock_path: Path) -> dict[str, Any] | None:
    """dvc.lock's ``stages`` mapping (stage name -> its entry); None without a lock file. Raises
    ConfigError (one line naming the file) when it is not a dvc.lock: a bad input, found before any
    work (exit 2)."""
    from mage_core.config import ConfigError

    lock_path = Path(lock_path)
    if not lock_path.is_file():
        return None
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's: a large lock reads ~10x faster
    try:
        data = yaml.load(lock_path.read_text(encoding="utf-8"), Loader=loader) or {}
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = f"not valid YAML{where} ({getattr(err, 'problem', None) or 'unreadable'})"
        raise ConfigError(str(lock_path), [f"{lock_path}: {problem}; {LOCK_FIX}"]) from None
    except UnicodeDecodeError as err:
        raise ConfigError(str(lock_path), [f"{lock_path}: not UTF-8 text ({err.reason}); {LOCK_FIX}"]) from None
    stages = data.get("stages") if isinstance(data, dict) else None
    if not isinstance(stages, dict):
        raise ConfigError(str(lock_path), [f"{lock_path}: not a dvc.lock (no 'stages' mapping); {LOCK_FIX}"])
    return stages


def lock_digest(lock_path: Path, exclude: Sequence[str] = REPORT_STAGES) -> str | None:
    """``sha256:<hex>`` of the outputs (``outs``: path and hash) of dvc.lock's stages but
    ``exclude``'s; None without a lock file. A file that is not a dvc.lock: ``lock_stages``."""
    stages = lock_stages(lock_path)
    if stages is None:
        return None
    kept = {name: (entry or {}).get("outs", []) if isinstance(entry, dict) else entry
            for name, entry in stages.items() if name not in exclude}
    canonical = json.dumps(kept, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def tracked(project_dir: Path, path: str) -> bool:
    """Whether git tracks ``path`` (a file, or any file under a folder)."""
    listed = _git(Path(project_dir), "ls-files", "--", path)
    return bool(listed and listed.strip())


def dvc_status(project_dir: Path) -> dict[str, Any]:
    """``dvc status --json`` of the project (every stage). Raises RuntimeError with
    DVC's own message when it fails."""
    done = subprocess.run([sys.executable, "-m", "dvc", "status", "--json"], cwd=project_dir,
                          capture_output=True, text=True, check=False,
                          env={**os.environ, "DVC_NO_ANALYTICS": "1"})
    if done.returncode != 0:
        # DVC's message, on one line: its code excerpts (``  2 stages: ...``) left out.
        said = " ".join(line.strip() for line in (done.stderr or done.stdout).splitlines()
                        if line.strip() and not re.match(r"\s+\d+ ", line))
        raise RuntimeError(f"`dvc status --json` failed in {project_dir} (exit {done.returncode}): {said[-2000:]}")
    try:
        return json.loads(done.stdout or "{}")
    except json.JSONDecodeError as err:
        raise RuntimeError(f"`dvc status --json` printed no JSON: {done.stdout[:500]!r}") from err


def stale_deps(status: dict[str, Any], project_dir: Path) -> dict[str, list[str]]:
    """Every code or params dependency whose hash in dvc.lock does not match the
    working tree (module docstring), as ``"<dep> (<change>)"`` -> the stages that
    record it, sorted."""
    out: dict[str, set[str]] = {}
    is_tracked: dict[str, bool] = {}
    for stage, changes in status.items():
        for change in changes if isinstance(changes, list) else []:
            deps = change.get("changed deps") if isinstance(change, dict) else None
            for path, what in (deps or {}).items():
                if isinstance(what, dict):  # a params file: section -> change
                    for section, kind in what.items():
                        out.setdefault(f"{path} section {section} ({kind})", set()).add(stage)
                    continue
                if path not in is_tracked:
                    is_tracked[path] = tracked(project_dir, path)
                if is_tracked[path]:
                    out.setdefault(f"{path} ({what})", set()).add(stage)
    return {dep: sorted(stages) for dep, stages in sorted(out.items())}
