"""Time per move of the Tic-Tac-Toe MCTS opponent, next to OpenSpiel's MCTSBot.

Usage::

    python benchmarks/bench_mcts.py [--repeats N] [--seed S] [--no-openspiel]

Target (issue): a 1000-simulation move on the empty board in <= 10 ms median.
OpenSpiel's pure-Python ``MCTSBot`` (``RandomRolloutEvaluator(n_rollouts=1)``,
uct_c=1.4, solve=True: the opponent of the paper's reference code) runs on the
same positions when ``pyspiel`` imports; the last column is its median time
divided by ours. Both run one move per timing, single-threaded; the one-off
table build of our search (all 5,478 positions) is timed separately.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable

import numpy as np
from rich.console import Console
from rich.table import Table

from mage_core.envs.tic_tac_toe.rules import play_moves
from mage_core.opponents.mcts import MCTSPlayer, warm_up

#: Fixed positions: cell indices (0..8 row-major) played from the empty board.
POSITIONS: dict[str, tuple[int, ...]] = {
    "empty": (),  # X to move
    "4": (4,),  # X center; O to move
    "0 4 8": (0, 4, 8),  # X corner, O center, X far corner; O to move (draw)
    "4 0 8 2": (4, 0, 8, 2),  # O threatens the top row; X to move
}
SIMULATIONS = (100, 1000)
TARGET_MS = 10.0


def _time_moves(move: Callable[[int], object], repeats: int) -> list[float]:
    """Milliseconds per call of ``move(i)`` for i = 0..repeats-1, after a warm-up."""
    move(-1)
    times = []
    for i in range(repeats):
        start = time.perf_counter()
        move(i)
        times.append((time.perf_counter() - start) * 1e3)
    return times


def _ours(moves: tuple[int, ...], sims: int, repeats: int, seed: int) -> list[float]:
    player, state = MCTSPlayer(f"mcts{sims}", sims), play_moves(moves)
    rng = np.random.default_rng(seed)
    return _time_moves(lambda i: player.act(state, rng), repeats)


def _openspiel(moves: tuple[int, ...], sims: int, repeats: int, seed: int) -> list[float] | None:
    try:
        import pyspiel
        from open_spiel.python.algorithms.mcts import MCTSBot, RandomRolloutEvaluator
    except ImportError:
        return None
    game = pyspiel.load_game("tic_tac_toe")
    random_state = np.random.RandomState(seed)
    bot = MCTSBot(game, uct_c=1.4, max_simulations=sims,
                  evaluator=RandomRolloutEvaluator(n_rollouts=1, random_state=random_state),
                  solve=True, random_state=random_state)
    state = game.new_initial_state()
    for move in moves:
        state.apply_action(move)
    return _time_moves(lambda i: bot.step(state), repeats)


def _p90(times: list[float]) -> float:
    return float(np.percentile(times, 90))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20, help="timed moves per cell (default 20)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-openspiel", action="store_true", help="skip OpenSpiel's MCTSBot")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")
    console = Console(width=110)

    start = time.perf_counter()
    warm_up()
    console.print(f"one-off table build: {(time.perf_counter() - start) * 1e3:.1f} ms")

    table = Table(title=f"MCTS time per move (ms), {args.repeats} moves per cell")
    for column in ("moves played", "sims", "ours median", "ours p90",
                   "OpenSpiel median", "OpenSpiel p90", "OpenSpiel / ours"):
        table.add_column(column, justify="left" if column == "moves played" else "right")
    empty_1000 = None
    for label, moves in POSITIONS.items():
        for sims in SIMULATIONS:
            ours = _ours(moves, sims, args.repeats, args.seed)
            theirs = None if args.no_openspiel else _openspiel(moves, sims, args.repeats, args.seed)
            median = statistics.median(ours)
            if not moves and sims == 1000:
                empty_1000 = median
            cells = [label, str(sims), f"{median:.2f}", f"{_p90(ours):.2f}"]
            if theirs is None:
                cells += ["-", "-", "-"]
            else:
                their_median = statistics.median(theirs)
                ratio = their_median / median
                cells += [f"{their_median:.2f}", f"{_p90(theirs):.2f}", f"{ratio:.1f}x"]
            table.add_row(*cells)
    console.print(table)
    verdict = "met" if empty_1000 is not None and empty_1000 <= TARGET_MS else "NOT met"
    console.print(f"target: <= {TARGET_MS:.0f} ms median for 1000 simulations on the empty board: "
                  f"{empty_1000:.2f} ms, {verdict}")


if __name__ == "__main__":
    main()
