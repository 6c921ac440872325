"""ALFWorld game generation (``mage data generate alfworld``: the games, then the replay
check) with this checkout's code and with the code of a base commit, in one run.

    python benchmarks/bench_alfworld_generate.py [--base c64d8ac] [--train 2] [--valid-seen 1]
        [--valid-unseen 1] [--task-types pick_and_place_simple pick_two_obj_and_place]
        [--workers N] [--repeat N] [--keep DIR]

The base commit is checked out with ``git worktree add --detach`` (once, at ``--base-dir``,
default ``/tmp/alf-base``; remove it with ``git worktree remove``). Each side runs in a
subprocess of its own checkout (``PYTHONPATH`` pointing at it, params.yaml of this
checkout, the same ``--set data.alfworld...`` overrides) and times
``commands.generate_from_params`` in that process, which is what the DVC stage
``data@alfworld`` runs after the interpreter's start-up and imports (timed apart). Prints
seconds per game for each side and the speed-up (``--repeat N``: N runs of each, alternated,
their medians), then compares every output folder with the base's first: the same files and
folders, byte for byte, or exit 1. ``--workers N``: at most N worker
processes on this checkout's side (``dataset.MAX_WORKERS``; its default: one per core but one,
at most 4); the base has none.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: What each side runs: load the params with the overrides, time the data stage's function.
RUNNER = """
import json, sys, time
started = time.perf_counter()
from mage_core.config import load_config
from mage_core.envs.alfworld import commands, generate  # alfworld, textworld, fast-downward: imported before the clock
params, out, result, workers = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
overrides = json.loads(sys.argv[5])
if workers >= 0:
    from mage_core.envs.alfworld import dataset
    dataset.MAX_WORKERS = workers
cfg = load_config(params, overrides)
imported = time.perf_counter()
status = commands.generate_from_params(cfg, out)
done = time.perf_counter()
with open(result, "w") as f:
    json.dump({"status": status, "imports": imported - started, "seconds": done - imported}, f)
"""


def base_checkout(commit: str, path: Path) -> Path:
    """A worktree of ``commit`` at ``path`` (made if missing; refused if it holds another commit)."""
    if not (path / "mage_core").is_dir():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), commit], check=True,
                       stdout=subprocess.DEVNULL)
    head = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    wanted = subprocess.run(["git", "-C", str(ROOT), "rev-parse", commit], capture_output=True, text=True, check=True)
    if head.stdout != wanted.stdout:
        raise SystemExit(f"{path} holds {head.stdout.strip()[:12]}, not {commit}: remove it (git worktree remove)")
    return path


def run_side(code_root: Path, out: Path, overrides: list[str], workers: int, log: Path) -> dict:
    """Generate and check the games with the code at ``code_root``; its timings."""
    result = out.parent / f"{out.name}.json"
    env = dict(os.environ, PYTHONPATH=str(code_root))
    started = time.perf_counter()
    with open(log, "w") as handle:
        subprocess.run([sys.executable, "-c", RUNNER, str(ROOT / "params.yaml"), str(out), str(result), str(workers),
                        json.dumps(overrides)], cwd=code_root, env=env, stdout=handle, stderr=subprocess.STDOUT,
                       check=True)
    timings = json.loads(result.read_text())
    timings["wall"] = time.perf_counter() - started
    timings["games"] = sum(1 for _ in out.rglob("game.tw-pddl"))
    return timings


def differences(left: Path, right: Path) -> list[str]:
    """Paths (files or folders) that are not in both trees, or whose bytes differ."""
    def tree(root: Path) -> dict[str, Path]:
        return {str(p.relative_to(root)): p for p in root.rglob("*")}

    a, b = tree(left), tree(right)
    out = sorted(set(a) ^ set(b))
    for name in sorted(set(a) & set(b)):
        if a[name].is_dir() != b[name].is_dir() or (a[name].is_file() and a[name].read_bytes() != b[name].read_bytes()):
            out.append(name)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default="c64d8ac", help="the commit to compare with (default: %(default)s)")
    parser.add_argument("--base-dir", default="/tmp/alf-base", help="its worktree (default: %(default)s)")
    parser.add_argument("--train", type=int, default=2)
    parser.add_argument("--valid-seen", type=int, default=1)
    parser.add_argument("--valid-unseen", type=int, default=1)
    parser.add_argument("--task-types", nargs="+", default=["pick_and_place_simple", "pick_two_obj_and_place"])
    parser.add_argument("--workers", type=int, default=-1, help="at most N worker processes on this checkout's side (default: its own cap)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each side, alternated (default: %(default)s)")
    parser.add_argument("--keep", metavar="DIR", help="write the outputs and logs here (default: a temporary folder)")
    args = parser.parse_args()
    overrides = [f"data.alfworld.train={args.train}", f"data.alfworld.valid_seen={args.valid_seen}",
                 f"data.alfworld.valid_unseen={args.valid_unseen}",
                 "data.alfworld.task_types=[" + ",".join(args.task_types) + "]"]
    base = base_checkout(args.base, Path(args.base_dir))
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-alfworld-generate-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"games: {', '.join(overrides)}; outputs in {work}", flush=True)
    sides: dict[str, list[dict]] = {"base": [], "this": []}
    for repeat in range(args.repeat):  # alternated, so that a change of the machine's load hits both
        for side, code_root, workers in (("base", base, -1), ("this", ROOT, args.workers)):
            t = run_side(code_root, work / f"{side}-{repeat}", overrides, workers, work / f"{side}-{repeat}.log")
            sides[side].append(t)
            label = f"base {args.base}" if side == "base" else "this checkout"
            print(f"{label:>16}: {t['games']} games, {t['seconds']:.1f} s ({t['seconds'] / max(t['games'], 1):.3f} s a "
                  f"game; imports {t['imports']:.1f} s, whole process {t['wall']:.1f} s), exit {t['status']}", flush=True)
    per_game = {side: statistics.median(t["seconds"] / max(t["games"], 1) for t in runs) for side, runs in sides.items()}
    print(f"seconds a game (median of {args.repeat}): base {per_game['base']:.3f}, this checkout {per_game['this']:.3f}; "
          f"speed-up: {per_game['base'] / per_game['this']:.1f}x a game")
    failed = [t for runs in sides.values() for t in runs if t["status"]]
    diff = sorted({d for repeat in range(args.repeat) for side in ("base", "this")
                   for d in differences(work / "base-0", work / f"{side}-{repeat}")})
    if diff or failed:
        print("DIFFERENT outputs: " + ", ".join(diff[:20]) if diff else "a side failed (see its log)")
        return 1
    print(f"outputs byte-identical: {sum(1 for p in (work / 'this-0').rglob('*') if p.is_file())} files")
    return 0

if __name__ == "__main__":
    sys.exit(main())
