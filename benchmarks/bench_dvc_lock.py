"""What dvc.lock costs DVC: the committed lock (each stage depends on one manifest of its code)
against the same lock with every file of each manifest listed as its own dependency, and against
the lock of a commit from before the code stage (``--before``: 0816413's, 1.8 MB).

Usage: ``python benchmarks/bench_dvc_lock.py [--repeats N] [--before REV]``. Times, with DVC's
own functions, the two things DVC does with dvc.lock around every stage: read it (``parse_yaml``,
ruamel's safe loader: ``dvc status``, ``dvc repro`` before the command) and record the stage in it
(``modify_yaml``: ruamel's round-trip loader and dumper, which keep comments and order, after the
command); prints the sizes, dependency entries and median times. Needs the committed dvc.lock;
the manifests are computed from the code (``mage_core.stages.code_deps``), not read from
artifacts/.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import yaml

from mage_core.stages.code_deps import manifest_spec, stage_files

ROOT = Path(__file__).resolve().parents[1]


def expanded(lock: dict) -> dict:
    """``lock`` with each manifest dependency replaced by one entry per file it lists."""
    out = copy.deepcopy(lock)
    files: dict[str, list[dict]] = {}
    for entry in out["stages"].values():
        deps = []
        for dep in entry.get("deps") or []:
            path, spec = dep["path"], manifest_spec(dep["path"])
            if spec is None:
                deps.append(dep)
                continue
            if path not in files:
                files[path] = [{"path": f, "hash": "md5", "md5": hashlib.md5((ROOT / f).read_bytes()).hexdigest(),
                                "size": (ROOT / f).stat().st_size} for f in stage_files(ROOT, *spec)]
            deps.extend(files[path])
        entry["deps"] = deps
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--before", default="0816413", metavar="REV",
                        help="also time this commit's dvc.lock, if git has it (default: %(default)s)")
    args = parser.parse_args()
    from dvc.utils.serialize import modify_yaml, parse_yaml

    text = (ROOT / "dvc.lock").read_text(encoding="utf-8")
    lock = yaml.load(text, Loader=yaml.CSafeLoader)
    forms = {"one manifest a stage (committed)": text,
             "every file a dependency": yaml.safe_dump(expanded(lock), sort_keys=False)}
    before = subprocess.run(["git", "show", f"{args.before}:dvc.lock"], cwd=ROOT, capture_output=True, text=True)
    if before.returncode == 0:  # the lock as DVC wrote it then: folders as one entry, one slot per file
        forms[f"{args.before}'s (numbered slots)"] = before.stdout
    print(f"{'dvc.lock':34s} {'MB':>5s} {'deps':>6s} {'read (median)':>14s} {'record (median)':>16s}")
    for name, body in forms.items():
        deps = sum(len(e.get("deps") or []) for e in yaml.load(body, Loader=yaml.CSafeLoader)["stages"].values())
        reads, records = [], []
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "dvc.lock"
            path.write_text(body, encoding="utf-8")
            for _ in range(args.repeats):
                clock = time.perf_counter()
                parse_yaml(body, "dvc.lock")
                reads.append(time.perf_counter() - clock)
                clock = time.perf_counter()
                with modify_yaml(str(path)) as data:
                    data["schema"] = data.get("schema", "2.0")
                records.append(time.perf_counter() - clock)
        print(f"{name:34s} {len(body.encode()) / 1e6:5.2f} {deps:6d} {statistics.median(reads):12.2f} s "
              f"{statistics.median(records):14.2f} s")


if __name__ == "__main__":
    main()
