"""ALFWorld's cost on this CPU: the engine (reset, restart, step) with and without the
memos of mage_core/envs/alfworld/cache.py, and an evaluation played in this process
or on Ray rollout workers.

    python benchmarks/bench_alfworld.py [--data data/alfworld] [--games 6] [--meta-episodes 24]
                                        [--workers 0 2] [--skip-eval]

Needs the generated games (``mage data generate alfworld``, or ``make run``'s
``data@alfworld`` stage) and the ``alfworld`` extra.

Engine: for each of ``--games`` games of ``valid_seen``, one ``load`` + ``reset``
(a game's first episode), then a ``reset`` of the same game (a restart: the next
episode of a meta-episode) and the steps of its expert walkthrough, each timed; first
with the memos taken out, then with them (the memo holds a translation only after its
first use, so the first row of "memoized" is cold and later restarts are warm).

Evaluation: the in-domain suite (``valid_seen``, K=3 episodes retrying the same game,
10 turns at most) with the untrained embedded model in constrained mode, for each
``--workers`` value (0: this process; N: N Ray actors, each with its own engine and
copy of the policy). Prints wall time, episodes per second and the speed-up over
workers 0. Each worker process pays the imports and its own memo's cold translations.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich_argparse import RichHelpFormatter


def bench_engine(games: list[str], memo: bool) -> dict[str, float]:
    from mage_core.envs.alfworld import cache
    from mage_core.envs.alfworld.env import walkthrough
    from mage_core.envs.alfworld.generate import make_play_env

    engine = make_play_env()  # installs the memos
    if not memo:
        cache.uninstall()
    first, restart, steps = [], [], []
    try:
        for game in games:
            start = time.perf_counter()
            engine.load(game)
            engine.reset()
            first.append(time.perf_counter() - start)
            start = time.perf_counter()
            engine.reset()
            restart.append(time.perf_counter() - start)
            for command in walkthrough(game):
                start = time.perf_counter()
                engine.step(command)
                steps.append(time.perf_counter() - start)
    finally:
        cache.install()
    return {"first": statistics.median(first), "restart": statistics.median(restart),
            "step": statistics.median(steps), "steps": len(steps)}


def bench_eval(data: str, meta_episodes: int, workers: int) -> tuple[float, int]:
    from mage_core.config import parse_config
    from mage_core.stages.evaluate import evaluate
    from mage_core.stages.train import build_policy

    cfg = parse_config({
        "env": {"name": "alfworld", "alfworld": {"data_path": data}},
        "algorithm": {"preset": "mage"}, "rollout": {"restart": "same", "workers": workers},
        "tournament": {"matches": []}, "tracking": {"mlflow": False}, "train": {"num_threads": 1},
    })
    with tempfile.TemporaryDirectory() as tmp:
        build_policy(cfg, Path(tmp))
        start = time.perf_counter()
        evaluate(cfg, Path(tmp) / "policy-init", Path(tmp) / "eval", "in_domain", per_opponent_seat=meta_episodes)
        seconds = time.perf_counter() - start
        import pandas as pd

        episodes = len(pd.read_parquet(Path(tmp) / "eval" / "trials.parquet"))
    return seconds, episodes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=RichHelpFormatter)
    parser.add_argument("--data", default="data/alfworld", help="generated games (default: data/alfworld)")
    parser.add_argument("--games", type=int, default=6, help="games timed in the engine table")
    parser.add_argument("--meta-episodes", type=int, default=24, help="meta-episodes of the evaluation")
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 2], help="rollout.workers values")
    parser.add_argument("--skip-eval", action="store_true", help="time the engine only")
    args = parser.parse_args()
    console = Console(width=110)
    try:
        import alfworld  # noqa: F401
    except ImportError:
        console.print("the alfworld extra is not installed (make setup installs it): nothing measured")
        return 2
    from mage_core.envs.alfworld.env import split_games

    try:
        games = sorted(split_games(args.data, "eval_in_distribution"))[: args.games]
    except Exception as err:  # a missing folder: say how to make it
        console.print(f"{err}\nmake the games first: mage data generate alfworld --out {args.data}")
        return 2

    engine = Table(title=f"ALFWorld engine, median seconds over {len(games)} games of {args.data}")
    for column in ("memos", "load + reset (first episode)", "reset (restart)", "step", "steps timed"):
        engine.add_column(column, justify="right")
    for memo in (False, True):
        row = bench_engine(games, memo)
        engine.add_row("on" if memo else "off", f"{row['first']:.3f}", f"{row['restart']:.3f}",
                       f"{row['step']:.3f}", str(row["steps"]))
    console.print(engine)
    if args.skip_eval:
        return 0

    table = Table(title=f"In-domain evaluation: {args.meta_episodes} meta-episodes x K=3, embedded model")
    for column in ("rollout.workers", "wall s", "episodes", "episodes / s", "speed-up"):
        table.add_column(column, justify="right")
    base = None
    for workers in args.workers:
        seconds, episodes = bench_eval(args.data, args.meta_episodes, workers)
        base = base or seconds
        table.add_row(str(workers), f"{seconds:.1f}", str(episodes), f"{episodes / seconds:.2f}",
                      f"{base / seconds:.2f}x")
    console.print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
