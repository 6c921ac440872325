"""``mage alfworld generate`` and ``mage alfworld check``: ALFWorld games made offline.

``generate`` writes games of the six task types into the official split folders
(``train``, ``valid_seen``, ``valid_unseen``), each kept only if alfworld's
hand-coded expert wins it; it writes into a temporary folder and moves it into
place at the end, so an interrupted run leaves nothing partial. ``check`` replays
every game's stored walkthrough in TextWorld's PDDL engine with ALFWorld's
wrappers (no expert) and fails (exit 1) if one does not win, and refuses (exit 2,
never loading it) a file that is no game or whose grammar holds code (grammar.py).

ALFWorld's own commands, in its folder: ``mage data generate alfworld`` reaches
``generate_from_params`` through the task (``TaskData.generate``), and the DVC stage
``data@alfworld``, which depends on this folder, re-runs when they change.
"""

from __future__ import annotations

import collections
import os
import shutil
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import Progress
from rich.table import Table

from mage_core.io.atomic import DIR_MODE
from mage_core.schema import ConfigError


def generate(out: str, seed: int, train: int, valid_seen: int, valid_unseen: int, task_types=None) -> int:
    problems = [f"--{name.replace('_', '-')}: must be >= 0, got {value}"
                for name, value in (("train", train), ("valid_seen", valid_seen), ("valid_unseen", valid_unseen))
                if value < 0]
    if problems:
        raise ConfigError("command line", problems)
    from mage_core.envs.alfworld import dataset
    from mage_core.envs.alfworld import generate as G

    counts = {"train": train, "eval_in_distribution": valid_seen, "eval_out_of_distribution": valid_unseen}
    counts = {split: n for split, n in counts.items() if n}
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    console = Console()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{target.name}-") as tmp:
        os.chmod(tmp, DIR_MODE)  # what the published folder keeps (TemporaryDirectory makes 0700)
        with Progress(console=console, transient=True) as progress:
            kinds = list(task_types or G.TASK_TYPES.values())
            task = progress.add_task("ALFWorld games (expert-checked)", total=len(kinds) * sum(counts.values()))
            made = dataset.generate_dataset(tmp, seed, counts, progress=lambda n: progress.advance(task, n),
                                              task_types=kinds)
        if target.exists():
            shutil.rmtree(target)
        Path(tmp).rename(target)
        Path(tmp).mkdir()  # the context manager removes it again
    table = Table(title=f"ALFWorld games in {target} (seed {seed}, {time.perf_counter() - started:.0f} s)")
    for column in ("split", "folder", "games", "expert steps (min-max)"):
        table.add_column(column)
    for split, games in made.items():
        steps = [s for _, _, s in games]
        table.add_row(split, G.SPLIT_FOLDERS[split], str(len(games)), f"{min(steps)}-{max(steps)}")
    console.print(table)
    return 0


def check(folder: str) -> int:
    console = Console()
    root = Path(folder)
    if not root.is_dir():
        console.print(f"[red]error:[/red] {folder}: no such folder (generate one: mage alfworld generate --out {folder})")
        return 2
    from mage_core.envs.alfworld import generate as G

    files = G.game_files(folder)
    if not files:
        console.print(f"[red]error:[/red] {folder}: no game.tw-pddl under it")
        return 2
    from mage_core.envs.alfworld.layout import AlfWorldDataError

    env = G.make_play_env()
    won: collections.Counter = collections.Counter()
    total: collections.Counter = collections.Counter()
    failures, refused = [], []
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("replaying walkthroughs", total=len(files))
        for gamefile in files:
            split = Path(gamefile).relative_to(root).parts[0]
            kind = Path(gamefile).parent.parent.name.split("-")[0]
            try:
                ok, _, problem = G.replay(env, gamefile)
            except AlfWorldDataError as err:  # not a game, or its grammar holds code: never loaded
                ok, problem = False, None
                refused.append(str(err))
            total[(split, kind)] += 1
            won[(split, kind)] += ok
            if not ok and problem is not None:
                failures.append((gamefile, problem))
            progress.advance(task)
    table = Table(title=f"ALFWorld games in {folder}: {len(files)}")
    for column in ("split", "task type", "walkthrough wins"):
        table.add_column(column)
    for key in sorted(total):
        table.add_row(key[0], key[1], f"{won[key]}/{total[key]}")
    console.print(table)
    for gamefile, problem in failures[:10]:
        console.print(f"[red]not solvable[/red] {gamefile}: {problem}", soft_wrap=True)
    for message in refused:
        console.print(f"[red]refused[/red] {escape(message)}", soft_wrap=True, highlight=False)
    return 2 if refused else 1 if failures else 0


def generate_from_params(cfg, out: str) -> int:
    """``mage data generate alfworld``: the games of ``data.alfworld``, then the replay check."""
    d = cfg.data.alfworld
    status = generate(out, d.seed, d.train, d.valid_seen, d.valid_unseen, d.task_types)
    return status if status != 0 else check(out)


def run_generate(out: str, seed: int, train: int, valid_seen: int, valid_unseen: int) -> int:
    try:
        return generate(out, seed, train, valid_seen, valid_unseen)
    except ConfigError as err:
        Console(stderr=True).print(str(err))
        return 2
