"""``mage validate``: check params.yaml and show what it resolves to."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from rich.console import Console
from rich.table import Table

from mage_core.config import load_config
from mage_core.envs.registry import two_player_games
from mage_core.opponents.population import Population
from mage_core.stages import dvc_runs


def run(params: str, overrides: Sequence[str] = (), sync_dvc: bool = False) -> int:
    cfg = load_config(params, overrides)
    console = Console()
    console.print(f"[green]ok[/]: {params} is valid (seed {cfg.seed}, training game [bold]{cfg.env.name}[/])")
    status = _check_stage_runs(Path(params), sync_dvc, console)
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
    return status


def _check_stage_runs(params: Path, sync: bool, console: Console) -> int:
    """The project's dvc.runs.yaml against its params.yaml (a project's params file only: the one
    dvc.yaml reads): 1 when stale and not rewritten."""
    project = params.resolve().parent
    if params.name != "params.yaml" or not (project / "dvc.yaml").is_file():
        return 0
    problem = dvc_runs.stale(project)
    if problem is None:
        return 0
    if sync:
        dvc_runs.write(project)
        console.print(f"rewrote {project / dvc_runs.RUNS_FILE} from params.yaml", soft_wrap=True)
        return 0
    console.print(f"[bold red]stale[/]: {problem}; `dvc repro` would run the old runs and warm starts "
                  "(`mage validate --sync-dvc` rewrites it; `mage reproduce` does so "
                  "itself)", soft_wrap=True)
    return 1
