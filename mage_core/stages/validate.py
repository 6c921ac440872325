"""``mage validate``: check params.yaml and show what it resolves to."""

from __future__ import annotations

from typing import Sequence

from rich.console import Console
from rich.table import Table

from mage_core.config import load_config
from mage_core.envs.registry import two_player_games
from mage_core.opponents.population import Population


def run(params: str, overrides: Sequence[str] = ()) -> int:
    cfg = load_config(params, overrides)
    console = Console()
    console.print(f"[green]ok[/]: {params} is valid (seed {cfg.seed}, training game [bold]{cfg.env.name}[/])")
    for game in two_player_games():
        spec = getattr(cfg.population, game)
        title = f"{game} population: " + (spec if isinstance(spec, str) else "custom")
        table = Table(title=title, title_justify="left")
        table.add_column("opponent")
        table.add_column("agent seat")
        table.add_column("probability", justify="right")
        for (name, seat), p in sorted(Population(cfg.population.entries(game)).probabilities().items()):
            table.add_row(name, "first" if seat == 0 else "second", f"{p:.4f}")
        console.print(table)
    if cfg.tournament.matches:
        console.print(f"tournament: {len(cfg.tournament.matches)} match(es) configured")
    return 0
