"""``mage webshop generate`` and ``mage webshop check``: WebShop catalogues
(and ``mage data generate webshop``, the DVC stage ``data@webshop``).

``generate`` writes a catalogue in the official file schema from a seed (no
download); ``check`` loads a catalogue folder (generated or the official
files), prints its splits, plays the scripted expert on every goal (each must
be bought with score 1) and a uniformly random shopper on the evaluation split
for comparison. A catalogue the expert cannot solve fails the check (exit 1).

WebShop's own commands, in its folder: ``mage data generate webshop`` reaches
``generate_from_params`` through the task (``TaskData.generate``), and the DVC stage
``data@webshop``, which depends on this folder, re-runs when they change.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from rich.console import Console
from rich.progress import Progress
from rich.table import Table
from rich.text import Text

from mage_core.io.atomic import DIR_MODE
from mage_core.schema import ConfigError
from mage_core.envs.webshop.catalogue import CatalogueError, generate_catalogue, load_catalogue, write_catalogue
from mage_core.envs.webshop.env import WebShopEnv, expert_action, split_goals
from mage_core.envs.webshop.params import SPLITS, WebShopSettings


def _error(message: str) -> int:
    """Print ``error: message`` on one line (no markup, no wrapping) to stderr; the exit code 2."""
    Console(stderr=True, soft_wrap=True).print(Text.assemble(("error: ", "bold red"), message))
    return 2


def _unwritable(target: Path, into: bool = True) -> str | None:
    """Why ``target`` cannot become a catalogue folder (None if it can): a file of that
    name, a file among its parents, or a folder that cannot be written. ``into``: the
    files are written into ``target`` itself; otherwise into its parent (then moved)."""
    import os

    if target.exists() and not target.is_dir():
        return f"{target} is a file, not a folder"
    for folder in ([target] if into else []) + list(target.parents):
        if folder.exists():
            if not folder.is_dir():
                return f"{folder} is a file, so no folder can be made under it"
            if not os.access(folder, os.W_OK | os.X_OK):
                return f"{folder} is not writable"
            return None
    return None


def generate_from_params(cfg, out: str) -> int:
    """``mage data generate webshop``: the catalogue of ``data.webshop``, written to a
    temporary folder, checked (the expert must buy every goal), then moved to
    ``out`` (an older catalogue there is replaced only by a checked one)."""
    import os
    import shutil
    import tempfile

    d = cfg.data.webshop
    target = Path(out)
    reason = _unwritable(target, into=False)
    if reason:
        return _error(f"--out {target}: {reason}; choose a writable folder (nothing was written)")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{target.name}-") as tmp:
            os.chmod(tmp, DIR_MODE)  # what the published folder keeps (TemporaryDirectory makes 0700)
            write_catalogue(generate_catalogue(np.random.default_rng(d.seed), d.products_per_category,
                                               d.instructions_per_product), tmp)
            w = cfg.env.webshop
            status = check(tmp, w.load_seed, w.num_eval, w.skip_unknown_goals, w.num_select, label=str(target))
            if status != 0:
                return status
            if target.exists():
                shutil.rmtree(target)
            Path(tmp).rename(target)
            Path(tmp).mkdir()  # the context manager removes it again
    except OSError as err:
        return _error(f"--out {target}: cannot write the catalogue ({err.strerror or err}); choose a writable folder")
    Console().print(f"wrote {target} (data.webshop: seed {d.seed}, {d.products_per_category} products per "
                    f"category, up to {d.instructions_per_product} instructions each)")
    return 0


def generate(out: str, seed: int, products_per_category: int, instructions_per_product: int) -> int:
    problems = []
    if products_per_category < 1:
        problems.append(f"--products-per-category: must be >= 1, got {products_per_category}")
    if instructions_per_product < 1:
        problems.append(f"--instructions-per-product: must be >= 1, got {instructions_per_product}")
    if problems:
        raise ConfigError("command line", problems)
    reason = _unwritable(Path(out))
    if reason:
        return _error(f"--out {out}: {reason}; choose a writable folder (nothing was written)")
    content = generate_catalogue(np.random.default_rng(seed), products_per_category, instructions_per_product)
    try:
        folder = write_catalogue(content, out)
    except OSError as err:
        return _error(f"--out {out}: cannot write the catalogue ({err.strerror or err}); choose a writable folder")
    Console().print(f"wrote {len(content['items_shuffle.json'])} products to {folder} "
                    f"(check it: mage webshop check {folder})")
    return 0


def play_expert(env: WebShopEnv, goal) -> tuple[float, int]:
    """The expert's purchase score on ``goal`` and the turns it took (score 0 if it never bought)."""
    env.set_goal(goal)
    while not env.done:
        env.step(expert_action(env))
    return (env.last_purchase.reward if env.last_purchase else 0.0), env.turn


def play_random(env: WebShopEnv, goal, rng: np.random.Generator) -> float:
    """A shopper choosing uniformly among the legal actions; its score (0 if it never bought)."""
    env.set_goal(goal)
    while not env.done:
        actions = env.legal_actions()
        env.step(actions[int(rng.integers(len(actions)))])
    return env.last_purchase.reward if env.last_purchase else 0.0


def check(folder: str, seed: int, num_eval: int, skip_unknown_goals: bool = False, num_select: int = 100,
          label: str | None = None) -> int:
    console = Console()
    settings = WebShopSettings(data_path=folder, load_seed=seed, num_eval=num_eval, num_select=num_select,
                               skip_unknown_goals=skip_unknown_goals)
    try:
        catalogue = load_catalogue(folder, seed=seed, skip_unknown_goals=skip_unknown_goals)
    except CatalogueError as err:
        return _error(str(err))
    splits = {}
    for name in SPLITS:
        try:
            splits[name] = split_goals(catalogue, settings.replace(split=name))
        except CatalogueError:
            splits[name] = ()  # an empty split: shown as 0 goals
    # the expert must solve every goal within the paper's 12 turns
    env = WebShopEnv(WebShopSettings(), np.random.default_rng(seed), catalogue, catalogue.goals)
    table = Table(title=f"WebShop catalogue {label or folder}: {len(catalogue.products)} products")
    for column in ("split", "goals", "expert solved", "expert turns (max)", "random shopper score (mean)"):
        table.add_column(column, justify="right")
    failures = []
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("expert", total=len(catalogue.goals))
        for name, goals in splits.items():
            solved, turns = 0, []
            for goal in goals:
                score, n = play_expert(env, goal)
                solved += score == 1.0
                turns.append(n)
                if score != 1.0:
                    failures.append((name, goal.instruction, score))
                progress.advance(task)
            rng = np.random.default_rng([seed, len(name)])
            random_scores = [play_random(env, g, rng) for g in goals[:200]]
            table.add_row(name, str(len(goals)), f"{solved}/{len(goals)}",
                          f"{np.mean(turns):.1f} ({max(turns)})" if turns else "-",
                          f"{np.mean(random_scores):.3f} on {len(random_scores)}" if random_scores else "-")
    console.print(table)
    if catalogue.skipped_goals:
        console.print(f"skipped {catalogue.skipped_goals} instructions for products the products file lacks")
    for name, instruction, score in failures[:10]:
        console.print(f"[red]expert failed[/red] ({name}, score {score:.3f}): {instruction}")
    return 1 if failures else 0


def run_generate(out: str, seed: int, products_per_category: int, instructions_per_product: int) -> int:
    try:
        return generate(out, seed, products_per_category, instructions_per_product)
    except ConfigError as err:
        Console(stderr=True).print(str(err))
        return 2


def run_check(folder: str, seed: int, num_eval: int, skip_unknown_goals: bool = False, num_select: int = 100) -> int:
    if num_eval < 0 or num_select < 0:
        return _error(f"--num-eval / --num-select: must be >= 0, got {num_eval} / {num_select}")
    if not Path(folder).exists():
        return _error(f"{folder}: no such folder (generate one: mage webshop generate --out {folder})")
    return check(folder, seed, num_eval, skip_unknown_goals, num_select)
