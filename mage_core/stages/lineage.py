"""``mage lineage``: does the committed lineage describe the committed code?

Prints the checkout's commit, the digest of the outputs dvc.lock records (every stage's but the
report's: ``tracking.lineage.lock_digest``), what ``reports/report.md`` says it was
made from, and every code or params dependency whose hash in dvc.lock no longer
matches the working tree (``dvc status``), with the stages whose code changed (their manifests,
``stages.code_deps``, as the code stage would write them now). Exit 0 when nothing is stale and the
report's digest is dvc.lock's, and the generated stage graph (dvc.runs.yaml: ``stages.dvc_runs``)
still follows params.yaml; 1 otherwise, with
what to run (``mage reproduce``, which reruns what ``dvc status`` lists, then commit reports/ and
dvc.lock: CONTRIBUTING.md, "Lineage"); 2 on bad input (a dvc.lock that
is not one, a project DVC cannot read), in one line naming the file.
"""

from __future__ import annotations

import re
from pathlib import Path

from rich.console import Console

from mage_core.config import ConfigError
from mage_core.stages import dvc_runs
from mage_core.tracking.lineage import LOCK_FIX, dvc_status, git_state, lock_digest, stale_deps

#: How report.md states its origin (``report.lineage_line``), read back here.
REPORT_LINE = re.compile(r"git commit `(?P<commit>[0-9a-f]{7,40})`.*?digest `(?P<digest>sha256:[0-9a-f]{64})`")


def report_claims(report: Path) -> tuple[str, str] | None:
    """(commit, lock digest) that ``report`` states, None if it states none."""
    if not report.is_file():
        return None
    match = REPORT_LINE.search(report.read_text(encoding="utf-8"))
    return (match["commit"], match["digest"]) if match else None


def code_changes(project: Path, lock: Path) -> list[str]:
    """The stages of ``lock`` whose code manifest (``stages.code_deps``) no longer matches the code
    under ``project``: what a rerun of the code stage makes stale. Empty without manifests."""
    import hashlib

    from mage_core.stages.code_deps import manifest_spec, manifest_text
    from mage_core.tracking.lineage import lock_stages

    stages = lock_stages(lock) or {}
    now: dict[str, str] = {}
    changed = set()
    for name, entry in stages.items():
        for dep in (entry.get("deps") if isinstance(entry, dict) else None) or []:
            path = str(dep.get("path", ""))
            spec = manifest_spec(path)
            if spec is None:
                continue
            if path not in now:
                now[path] = hashlib.md5(manifest_text(project, *spec).encode()).hexdigest()
            if now[path] != dep.get("md5"):
                changed.add(name)
    return sorted(changed)


def check(project: Path, report: Path) -> list[str]:
    """What is out of date, one line each (empty: the lineage holds); prints the facts."""
    console = Console()
    git = git_state(project)
    digest = lock_digest(project / "dvc.lock")
    console.print(f"checkout: git commit {git.describe()}")
    console.print(f"dvc.lock: {digest or 'absent'} (the outputs of every stage but the report)")
    problems = []
    claims = report_claims(report)
    if claims is None:
        console.print(f"{report}: states no commit or dvc.lock digest")
        problems.append(f"{report} states no lineage (not written by this version of `mage report`)")
    else:
        commit, claimed = claims
        console.print(f"{report}: made from git commit {commit}, dvc.lock digest {claimed}")
        if claimed != digest:
            problems.append(f"{report} was made from other outputs ({claimed}) than dvc.lock records "
                            f"({digest})")
    # a project of this pipeline generates part of its stage graph (another DVC project does not)
    generated = dvc_runs.stale(project) if (project / dvc_runs.RUNS_FILE).is_file() else None
    if generated is not None:  # the stage graph itself no longer follows the params
        problems.append(f"{generated} (`mage validate --sync-dvc` rewrites it; then rerun what `dvc status` lists)")
    if digest is None:
        problems.append("no dvc.lock: nothing records which code and params produced the outputs")
    else:
        try:
            status = dvc_status(project)
        except RuntimeError as err:  # DVC cannot read dvc.yaml, dvc.lock or params: a bad input
            raise ConfigError("dvc status", [f"{err}; fix the file it names (dvc.lock: {LOCK_FIX})"]) from None
        for dep, stages in stale_deps(status, project).items():
            problems.append(f"{dep} since dvc.lock recorded it, for {len(stages)} stage(s): {_named(stages)}")
        if (project / "mage_core").is_dir():
            changed = code_changes(project, project / "dvc.lock")
            if changed:
                problems.append(f"the code {len(changed)} stage(s) can load changed since dvc.lock recorded it: "
                                f"{_named(changed)}")
    return problems


def _named(stages: list[str]) -> str:
    return ", ".join(stages[:3]) + (f" and {len(stages) - 3} more" if len(stages) > 3 else "")


def run(project: str = ".", report: str | None = None) -> int:
    root = Path(project)
    if not (root / "dvc.yaml").is_file():
        raise ConfigError("command line", [f"--project: {root} holds no dvc.yaml (pass the project's folder)"])
    problems = check(root, Path(report) if report else root / "reports" / "report.md")
    console = Console()
    if problems:
        for line in problems:
            console.print(f"[red]{line}[/red]")
        console.print("The committed lineage does not describe this code: run `mage reproduce` (`make run`: it reruns "
                      "the stages `dvc status` lists) and commit reports/ and dvc.lock (CONTRIBUTING.md, \"Lineage\").")
        return 1
    console.print("lineage holds: dvc.lock matches the code and params, and the report was made from its outputs")
    return 0
