"""Does a later attempt use what the earlier one showed? Win rates by the previous attempt's outcome.

For each evaluation folder (``mage evaluate``'s ``trials.parquet``), the in-domain suite's
meta-episodes are split by the outcome of attempt k, and the share that wins attempt k + 1 is
printed for each side: ``P(win k+1 | won k)`` (does the policy repeat a win?) and
``P(win k+1 | lost k)`` (does it recover from a loss, using what the loss revealed?), with the
number of meta-episodes behind each share. An expert that reads its memory repeats every win and
recovers from many losses; a policy that ignores its memory recovers no more often than one
without memory (compare a run with its `react` counterpart: docs/learning.md, issue 41).

    python benchmarks/attempt_transitions.py artifacts/eval/minesweeper-mage artifacts/eval/minesweeper-react
    python benchmarks/attempt_transitions.py --env minesweeper       # every run of the task under artifacts/eval
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def transitions(folder: Path, suite: str = "in_domain") -> list[tuple[int, float, int, float, int]]:
    """(k, P(win k+1 | won k), n won, P(win k+1 | lost k), n lost) for k = 1 .. K-1."""
    import pandas as pd

    trials = folder / "trials.parquet"
    if not trials.is_file():
        raise FileNotFoundError(f"{trials}: no trial table (run `mage evaluate --out {folder}` first)")
    frame = pd.read_parquet(trials, columns=["suite", "meta_episode", "episode", "success"])
    frame = frame[frame.suite == suite]
    if frame.empty:
        raise ValueError(f"{trials}: no meta-episode of suite {suite!r}")
    wins = frame.pivot_table(index="meta_episode", columns="episode", values="success", aggfunc="first").astype(float)
    rows = []
    for k in sorted(wins.columns)[:-1]:
        after = wins[k + 1]
        won, lost = after[wins[k] == 1].dropna(), after[wins[k] == 0].dropna()
        rows.append((k, won.mean() if len(won) else float("nan"), len(won),
                     lost.mean() if len(lost) else float("nan"), len(lost)))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="*", type=Path, help="mage evaluate output folders")
    parser.add_argument("--env", help="every run of this task under --root (artifacts/eval/<env>-*)")
    parser.add_argument("--root", type=Path, default=Path("artifacts/eval"))
    parser.add_argument("--suite", default="in_domain")
    args = parser.parse_args(argv)
    folders = list(args.folders) + (sorted(args.root.glob(f"{args.env}-*")) if args.env else [])
    folders = [f for f in folders if f.is_dir()]
    if not folders:
        parser.error("no evaluation folder: give folders or --env with runs under --root")
    print(f"{'run':32s} {'k':>2s} {'P(win k+1 | won k)':>22s} {'P(win k+1 | lost k)':>23s}")
    for folder in folders:
        try:
            rows = transitions(folder, args.suite)
        except (FileNotFoundError, ValueError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        for k, p_won, n_won, p_lost, n_lost in rows:
            print(f"{folder.name:32s} {k:>2d} {p_won:>14.2f} (n={n_won:>3d}) {p_lost:>15.2f} (n={n_lost:>3d})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
