"""What an edit makes stale, measured on a fresh clone (issue 40; CONTRIBUTING.md, "Lineage").

Clones the repository (its committed HEAD: code, params.yaml, dvc.yaml, dvc.lock), appends a
comment line to each file named, one at a time, and counts the stages whose code or params
dependencies ``dvc status`` then finds changed, with the stages whose code manifest changed
(``mage lineage``'s rules: a fresh clone has no outputs in its DVC cache, and that is no
staleness; the code stage, which an edit always reruns, counts). Prints the stages of every
edit and a table:

    python benchmarks/bench_stale.py                         # the two edits the issue measures
    python benchmarks/bench_stale.py --edit mage_core/rollout/runner.py

No edit at all is measured first: the committed lineage must hold (0 stages).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
EDITS = ("mage_core/stages/report.py", "mage_core/envs/minesweeper/board.py")


def stale_stages(clone: Path) -> set[str]:
    """What ``dvc status`` finds changed (the code stage, a task's own folder) and the stages whose
    code manifest the code stage will rewrite (``mage lineage``'s two rules)."""
    from mage_core.stages.lineage import code_changes
    from mage_core.tracking.lineage import dvc_status, stale_deps

    found = {stage for stages in stale_deps(dvc_status(clone), clone).values() for stage in stages}
    return found | set(code_changes(clone, clone / "dvc.lock"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", default=str(ROOT), help="the repository to clone (default: this one)")
    parser.add_argument("--edit", action="append", help="a file to edit (repeatable; default: the issue's two)")
    args = parser.parse_args(argv)
    edits = args.edit or list(EDITS)
    with tempfile.TemporaryDirectory(prefix="bench-stale-") as tmp:
        clone = Path(tmp) / "clone"
        subprocess.run(["git", "clone", "--quiet", args.repo, str(clone)], check=True)
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=clone, capture_output=True, text=True,
                              check=True).stdout.strip()
        total = len(yaml.safe_load((clone / "dvc.lock").read_text(encoding="utf-8"))["stages"])
        rows = []
        for edit in [None, *edits]:
            started = time.perf_counter()
            if edit is None:
                stale = stale_stages(clone)
            else:
                path = clone / edit
                if not path.is_file():
                    parser.error(f"--edit {edit}: no such file in the clone")
                before = path.read_bytes()
                path.write_bytes(before + b"\n# an edit\n")
                try:
                    stale = stale_stages(clone)
                finally:
                    path.write_bytes(before)
            seconds = time.perf_counter() - started
            label = edit or "(no edit)"
            rows.append((label, len(stale), seconds))
            print(f"{label}: {len(stale)} of {total} stages stale: {', '.join(sorted(stale)) or '-'}")
    print(f"\nclone of {args.repo} at {head}; {total} stages in dvc.lock")
    print("| edit | stale stages | of | dvc status (s) |\n|---|---|---|---|")
    for label, count, seconds in rows:
        print(f"| `{label}` | {count} | {total} | {seconds:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
