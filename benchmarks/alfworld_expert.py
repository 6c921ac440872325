"""ALFWorld's searching expert on a game folder: its success by attempt on replayed games.

Each game of each split is played as a meta-episode of ``--attempts`` attempts
(``rollout.restart: same``), the expert (``mage_core.envs.alfworld.expert.act``) choosing every
command and reading what the earlier attempts revealed, exactly as ``mage sft``'s
demonstrations do but with no detour (where the expert has no admissible command it plays the
first one, as a recorded miss would; none did on the games of docs/learning.md). The gain from
the first attempt to the last is what its memory buys and what imitation can hand down (issue
41). Prints one row a split: games, success by attempt, seconds a meta-episode.

    python benchmarks/alfworld_expert.py --data data/alfworld
    python benchmarks/alfworld_expert.py --data /tmp/games --split eval_in_distribution --turns 10
"""

from __future__ import annotations

import argparse
import sys
import time


def play(data: str, split: str, attempts: int, turns: int, limit: int | None) -> tuple[int, list[float], float]:
    """(games, success share by attempt, seconds a meta-episode)."""
    import numpy as np

    from mage_core.envs.alfworld import expert
    from mage_core.envs.alfworld.env import AlfWorldEnv
    from mage_core.envs.alfworld.params import AlfWorldSettings

    env = AlfWorldEnv(AlfWorldSettings(data_path=data, split=split, max_turns=turns), np.random.default_rng(0))
    rng = np.random.default_rng(0)
    games = min(env.split_size(), limit or env.split_size())
    wins = [0] * attempts
    started = time.perf_counter()
    for index in range(games):
        env.reset_to(index)
        memory = []
        for attempt in range(attempts):
            if attempt:
                env.restart()
            while not env.done:
                command = expert.act(env, rng, memory)
                env.step(command if command is not None else env.legal_actions()[0])
            wins[attempt] += int(env.won)
            memory.append(env.revealed())
    return games, [w / games for w in wins], (time.perf_counter() - started) / max(games, 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="data/alfworld", help="the game folder (default data/alfworld)")
    parser.add_argument("--split", action="append", choices=["train", "eval_in_distribution", "eval_out_of_distribution"],
                        help="a split to play (repeatable; default all three)")
    parser.add_argument("--attempts", type=int, default=3, help="attempts a game (default 3)")
    parser.add_argument("--turns", type=int, default=10, help="turns an attempt (default 10, the paper's)")
    parser.add_argument("--limit", type=int, default=None, help="at most this many games a split")
    args = parser.parse_args(argv)
    if args.attempts < 1 or args.turns < 1:
        parser.error("--attempts and --turns must be at least 1")
    print(f"{'split':<26} {'games':>5}  success by attempt{'':<8} s/meta-episode")
    for split in args.split or ["train", "eval_in_distribution", "eval_out_of_distribution"]:
        games, shares, seconds = play(args.data, split, args.attempts, args.turns, args.limit)
        print(f"{split:<26} {games:>5}  {' / '.join(f'{s:.3f}' for s in shares):<26} {seconds:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
