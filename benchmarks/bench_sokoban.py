"""Sokoban generation and solving speed against the issue's targets.

    python benchmarks/bench_sokoban.py [--levels N] [--seed S]

Targets (issue, pure Python on this machine): generating an accepted 2-box 6x6
level in < 5 ms, solving one optimally (BFS) in < 1 ms median. Generation time
is measured per accepted level, retries included; the acceptance rate is
accepted levels / rooms drawn. Both selection modes of the generator are shown
(see mage_core/envs/sokoban/generate.py); "global" is the default.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter

import numpy as np
from rich.console import Console
from rich.table import Table
from rich_argparse import RichHelpFormatter

from mage_core.envs.sokoban.generate import generate_level_with_stats
from mage_core.envs.sokoban.level import SokobanLevel
from mage_core.envs.sokoban.solver import solve, solve_reference

GENERATION_TARGET_MS = 5.0  # 2-box levels
SOLVE_TARGET_MS = 1.0  # median, 2-box levels


def _ms(seconds: list[float], quantile: float) -> float:
    return float(np.quantile(seconds, quantile)) * 1e3


def bench_generation(
    levels: int, seed: int, num_boxes: int, selection: str
) -> tuple[list[SokobanLevel], dict[str, float | str]]:
    """Generate ``levels`` levels; time each call and collect the retry counts."""
    rng = np.random.default_rng(seed)
    times, tries, lengths, out = [], [], [], []
    for _ in range(levels):
        start = time.perf_counter()
        level, stats = generate_level_with_stats(rng, 6, num_boxes, selection=selection)
        times.append(time.perf_counter() - start)
        tries.append(stats.num_tries)
        lengths.append(stats.optimal_moves)
        out.append(level)
    row: dict[str, float | str] = {
        "median_ms": _ms(times, 0.5),
        "p90_ms": _ms(times, 0.9),
        "acceptance": levels / sum(tries),
        "mean_retries": sum(tries) / levels - 1,
        "moves": f"{min(lengths)} / {statistics.median(lengths):g} / {max(lengths)}",
    }
    return out, row


def bench_solve(levels: list[SokobanLevel], solver: object) -> tuple[float, float]:
    """Median and p90 solve time in ms over ``levels``."""
    times = []
    for level in levels:
        start = time.perf_counter()
        solver(level)  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return _ms(times, 0.5), _ms(times, 0.9)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=RichHelpFormatter)
    parser.add_argument("--levels", type=int, default=300, help="accepted levels per (boxes, mode)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    console = Console(width=110)

    gen = Table(title=f"Generation of {args.levels} accepted 6x6 levels per row (time per level, retries included)")
    for column in ("boxes", "mode", "median ms", "p90 ms", "target", "accepted", "retries",
                   "moves min/med/max"):
        gen.add_column(column, justify="right")
    two_box: list[SokobanLevel] = []
    lengths: Counter[int] = Counter()
    for num_boxes in (1, 2, 3):
        for selection in ("global", "window"):
            levels, row = bench_generation(args.levels, args.seed, num_boxes, selection)
            if num_boxes == 2 and selection == "global":
                two_box = levels
                lengths.update(len(solve(level) or []) for level in levels)
            target = ""
            if num_boxes == 2:
                ok = float(row["median_ms"]) < GENERATION_TARGET_MS and float(row["p90_ms"]) < GENERATION_TARGET_MS
                target = f"< {GENERATION_TARGET_MS:g} ms " + ("[green]met[/]" if ok else "[red]missed[/]")
            gen.add_row(str(num_boxes), selection, f"{row['median_ms']:.3f}", f"{row['p90_ms']:.3f}", target,
                        f"{row['acceptance']:.3f}", f"{row['mean_retries']:.2f}", str(row["moves"]))
    console.print(gen)

    solve_table = Table(title=f"BFS solve time over the {len(two_box)} generated 2-box levels (global selection)")
    for column in ("solver", "median ms", "p90 ms", "target"):
        solve_table.add_column(column, justify="right")
    fast = bench_solve(two_box, solve)
    plain = bench_solve(two_box, solve_reference)
    verdict = "[green]met[/]" if fast[0] < SOLVE_TARGET_MS else "[red]missed[/]"
    solve_table.add_row("solve (pruned, int states)", f"{fast[0]:.3f}", f"{fast[1]:.3f}",
                        f"median < {SOLVE_TARGET_MS:g} ms {verdict}")
    solve_table.add_row("solve_reference (plain BFS)", f"{plain[0]:.3f}", f"{plain[1]:.3f}", "")
    console.print(solve_table)
    histogram = ", ".join(f"{k}:{lengths[k]}" for k in sorted(lengths))
    console.print(f"2-box optimal solution lengths (moves:count): {histogram}")


if __name__ == "__main__":
    main()
