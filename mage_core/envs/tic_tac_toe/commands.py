"""``mage ttt analyze``: what a perfect exploiting player reaches at Tic-Tac-Toe.

For every opponent of the configured population (or those named with
``--opponent``) and each agent seat: the expectimax best response against the
opponent's move distribution (exact for pattern and random players, estimated
from ``--samples`` searches per position for MCTS), for two objectives: the
most wins (the success-rate ceiling) and never losing (the most wins among
the game-theoretically optimal moves, so no opponent can beat it). Each policy is then PLAYED against the
real opponent ``--games`` times: the played win rate, with its Wilson 95%
interval, is the honest figure (an estimated distribution makes the expectimax
value optimistic). Last, the population-weighted ceilings per seat and overall:
the bound next to every Tic-Tac-Toe learning figure (``best_response``).

Tic-Tac-Toe's own command, reached through its task (``Task.analyze``): the stage that calls
it (``stages.analyze``) loads the configuration; ``analyze`` takes it ready.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from mage_core.envs.tic_tac_toe.best_response import MoveDistributions, best_response, play
from mage_core.io.atomic import write_json_atomic
from mage_core.opponents.population import Population
from mage_core.opponents.registry import check_opponent_name, make_opponent
from mage_core.schema import ConfigError

SEAT_NAMES = {0: "first (X)", 1: "second (O)"}
#: The objectives reported: the success-rate ceiling and the never-lose policy.
REPORTED = ("win", "safe")


def analyze_opponent(opponent: object, seat: int, samples: int, games: int, seed: int) -> dict[str, object]:
    """One opponent in one agent seat: both objectives, estimated and played."""
    distributions = MoveDistributions(opponent, samples, np.random.default_rng([seed, seat, 0]))
    row: dict[str, object] = {"agent_seat": seat, "exact_distributions": distributions.exact}
    for offset, objective in enumerate(REPORTED, start=1):
        response = best_response(distributions, seat, objective)
        played = play(response, opponent, games, np.random.default_rng([seed, seat, offset]))
        low, high = played.win_interval()
        row[objective] = {
            "expectimax": dict(zip(("win", "draw", "loss"), response.value)),
            "played": {"games": played.games, "win": played.win_rate, "win_low": low, "win_high": high,
                       "draw": played.draws / played.games, "loss": played.losses / played.games},
        }
    row["positions"] = distributions.positions
    return row


def _check(samples: int, games: int) -> None:
    problems = []
    if samples < 1:
        problems.append(f"--samples: must be >= 1, got {samples}")
    if games < 1:
        problems.append(f"--games: must be >= 1, got {games}")
    if problems:
        raise ConfigError("command line", problems)


def analyze(cfg: Any, opponents: Sequence[str] | None = None, samples: int = 200, games: int = 2000,
            seed: int = 0, out: str | None = None) -> int:
    """``mage ttt analyze`` on the loaded configuration ``cfg``: the tables (and with ``out``
    the figures as JSON), exit code 0; ``ConfigError`` naming a bad option."""
    _check(samples, games)
    settings = cfg.opponents.settings()
    if opponents:
        problems = [f"--opponent: {p}" for name in opponents if (p := check_opponent_name("tic_tac_toe", name, settings.ttt_players))]
        if problems:
            raise ConfigError("command line", problems)
        pairs = {(name, seat): 0.5 / len(opponents) for name in opponents for seat in (0, 1)}
    else:
        pairs = {key: p for key, p in Population(cfg.population.entries("tic_tac_toe")).probabilities().items()
                 if p > 0}
    names = list(dict.fromkeys(name for name, _ in pairs))
    console = Console()
    results: dict[str, dict[int, dict[str, object]]] = {}
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("best responses", total=len(pairs))
        for index, name in enumerate(names):
            opponent = make_opponent("tic_tac_toe", name, settings)
            for seat in (0, 1):
                if (name, seat) not in pairs:
                    continue
                progress.update(task, description=f"{name}, agent {SEAT_NAMES[seat]}")
                results.setdefault(name, {})[seat] = analyze_opponent(opponent, seat, samples, games,
                                                                      seed * 1_000 + index)
                progress.advance(task)

    table = Table(title=f"Best response per opponent: played {games} games each (MCTS distributions from "
                        f"{samples} searches per position)")
    table.add_column("opponent", no_wrap=True)
    for col in ("agent seat", "most wins: expectimax win", "played win [95%]", "played loss",
                "never lose: played win", "played loss"):
        table.add_column(col)
    for name, seats in results.items():
        for seat, row in seats.items():
            win, safe = row["win"], row["safe"]
            table.add_row(
                name, SEAT_NAMES[seat], f"{win['expectimax']['win']:.3f}",  # type: ignore[index]
                f"{win['played']['win']:.3f} [{win['played']['win_low']:.3f}, {win['played']['win_high']:.3f}]",  # type: ignore[index]
                f"{win['played']['loss']:.3f}", f"{safe['played']['win']:.3f}", f"{safe['played']['loss']:.3f}")  # type: ignore[index]
    console.print(table)

    population: dict[str, dict[str, float]] = {}
    for label, seats in (("first (X)", (0,)), ("second (O)", (1,)), ("all (weighted)", (0, 1))):
        weight = sum(p for (_, s), p in pairs.items() if s in seats)
        if weight <= 0:
            continue
        figures = {}
        for objective in REPORTED:
            for measure in ("win", "loss"):
                figures[f"{objective}_{measure}"] = sum(
                    p * results[n][s][objective]["played"][measure]  # type: ignore[index]
                    for (n, s), p in pairs.items() if s in seats) / weight
        population[label] = figures
    pop_table = Table(title="Population (weighted by params.yaml; --opponent: equal weights): the ceiling of the "
                            "final episode's win rate")
    for col in ("agent seat", "most wins: win", "loss", "never lose: win", "loss"):
        pop_table.add_column(col)
    for label, f in population.items():
        pop_table.add_row(label, f"{f['win_win']:.3f}", f"{f['win_loss']:.3f}", f"{f['safe_win']:.3f}",
                          f"{f['safe_loss']:.3f}")
    console.print(pop_table)
    if out:
        write_json_atomic(Path(out), {
            "samples": samples, "games": games, "seed": seed,
            "pairs": [{"opponent": n, "agent_seat": s, "probability": p} for (n, s), p in pairs.items()],
            "opponents": {n: {str(s): row for s, row in seats.items()} for n, seats in results.items()},
            "population": population,
        })
        console.print(f"wrote {out}")
    return 0
