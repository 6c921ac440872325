"""``mage tournament``: head-to-head matches with confidence intervals."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Sequence

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from mage_core.config import Config, ConfigError, MatchConfig, load_config, parse_config
from mage_core.envs import registry as games
from mage_core.evaluation.tournament import MatchResult, play_match
from mage_core.io.atomic import check_writable, writable_problem, write_json_atomic
from mage_core.opponents.registry import make_opponent

GAME_LABELS = {"tic_tac_toe": "TTT", "kuhn_poker": "Kuhn"}


def resolve_matches(
    cfg: Config, game: str | None, player_a: str | None, player_b: str | None, num_games: int | None
) -> list[MatchConfig]:
    """The ad-hoc match of the command line, or the configured ones."""
    adhoc = (game, player_a, player_b)
    if any(x is not None for x in adhoc):
        if not all(x is not None for x in adhoc):
            raise ConfigError("command line", ["--game, --a and --b go together: give all three or none"])
        data = {"game": game, "player_a": player_a, "player_b": player_b, "num_games": num_games or 200}
        # Validate through the same schema as params.yaml, so errors read alike.
        parsed = parse_config(
            {"opponents": cfg.opponents.model_dump(), "tournament": {"matches": [data]}}, "command line"
        )
        return list(parsed.tournament.matches)
    matches = list(cfg.tournament.matches)
    if not matches:
        raise ConfigError("params", ["tournament.matches: empty; list matches there or pass --game/--a/--b"])
    if num_games is not None:
        if num_games < 1:
            raise ConfigError("command line", [f"--games: must be >= 1, got {num_games}"])
        matches = [m.model_copy(update={"num_games": num_games}) for m in matches]
    return matches


def run(
    params: str,
    game: str | None = None,
    player_a: str | None = None,
    player_b: str | None = None,
    num_games: int | None = None,
    seed: int | None = None,
    out: str = "reports/tournament.json",
    overrides: Sequence[str] = (),
) -> int:
    cfg = load_config(params, overrides)
    matches = resolve_matches(cfg, game, player_a, player_b, num_games)
    if out != "-":  # an output that cannot be written stops now, not after the games
        try:
            if Path(out).is_dir():
                raise IsADirectoryError(errno.EISDIR, "is a folder (give a file name, e.g. tournament.json)", out)
            check_writable(Path(out).resolve().parent)
        except OSError as err:
            raise ConfigError("command line", [f"--out {out}: {writable_problem(err)}"]) from None
    seed = cfg.seed if seed is None else seed
    settings = cfg.opponents.settings()
    console = Console()
    results: list[MatchResult] = []
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        for index, m in enumerate(matches):
            a = make_opponent(m.game, m.player_a, settings)
            b = make_opponent(m.game, m.player_b, settings)
            task = progress.add_task(f"{m.player_a} vs {m.player_b}", total=m.num_games)
            results.append(play_match(
                m.game, lambda rng, g=m.game: games.initial_state(g, rng), a, b, m.num_games,
                seed=seed * 1000 + index, on_game=lambda t=task: progress.advance(t),
            ))
    console.print(_table(results))
    if out != "-":
        payload = {
            f"tournament/{r.game}/{r.player_a}_vs_{r.player_b}": r.summary() for r in results
        }
        path = write_json_atomic(out, payload)
        console.print(f"results written to {path}")
    return 0


def _table(results: list[MatchResult]) -> Table:
    table = Table(
        title="Tournament: player A's results, seats alternating",
        caption="\\[low-high] = 95% interval (Wilson for rates). Payoff: Tic-Tac-Toe +1 win / -1 loss; "
                "Kuhn Poker chips per hand.",
    )
    table.add_column("player A vs player B", overflow="fold")
    table.add_column("games", justify="right")
    for col in ("A wins", "draws", "A losses", "A payoff"):
        table.add_column(col, justify="right")
    for r in results:
        s = r.summary()

        def interval(name: str, fmt: str = ".3f") -> str:
            return f"{s[name]:{fmt}} [{s[name + '_low']:{fmt}}-{s[name + '_high']:{fmt}}]"

        table.add_row(
            f"{r.player_a} vs {r.player_b} ({GAME_LABELS[r.game]})", str(r.num_games),
            interval("win_rate", ".2f"), interval("draw_rate", ".2f"), interval("loss_rate", ".2f"),
            f"{s['mean_payoff']:+.3f} ± {s['mean_payoff_high'] - s['mean_payoff']:.3f}",
        )
    return table
