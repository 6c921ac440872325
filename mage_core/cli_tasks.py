"""The task-specific sub-commands of ``mage``: the exact analyses of the two-player games (``mage kuhn``,
``mage ttt``) and the task data (``mage data``, ``mage alfworld``, ``mage webshop``). Each is a part as in
cli_commands.py: ``add_<command>(sub, fmt)`` adds its parser (cli.py's build_parser calls them after
cli_commands.py's), ``_cmd_<command>_<sub-command>`` runs it.

Like cli.py this imports only argparse (and cli_commands.py): each command imports its stage, or its
game's commands module, when it runs.
"""

from __future__ import annotations

import argparse

from mage_core.cli_commands import Commands, Formatter, _add_params


# ---- exact analyses of the games ----

def add_kuhn(sub: Commands, fmt: Formatter) -> None:
    """``mage kuhn analyze``: exact Kuhn Poker best responses; ``mage kuhn probe``: a policy's hand-2 bets."""
    kuhn = sub.add_parser("kuhn", help="exact Kuhn Poker analysis", formatter_class=fmt)
    kuhn_sub = kuhn.add_subparsers(dest="kuhn_command", metavar="<command>", required=True)
    p = kuhn_sub.add_parser("analyze", help="best responses and population values as exact fractions",
                            description=(
        "For every Kuhn opponent (the population in params.yaml, the user-defined behaviour strategies, or those "
        "named with --opponent) print the exact best-response value and strategy for each seat; then the best "
        "single fixed strategy against the weighted population, the value of knowing the opponent, and the "
        "Bayes-optimal final-hand value of a meta-episode (docs/method.md section 11)."), formatter_class=fmt)
    _add_params(p)
    p.add_argument("--opponent", action="append", metavar="NAME", help="analyse this opponent (repeatable)")
    p.add_argument("--meta-hands", type=int, default=3, metavar="K",
                   help="hands per meta-episode for the Bayes-optimal ceiling (default: %(default)s; 0 skips)")
    p.set_defaults(func=_cmd_kuhn_analyze)
    p = kuhn_sub.add_parser("probe", help="a trained policy's hand-2 bets given what hand 1 showed",
                            description=(
        "Against the configured Kuhn population (deterministic opponents; the exploration pair is "
        "--set population.kuhn_poker=probe), the agent acting first: for every way hand 1 can go, the policy's "
        "probability of betting its first decision of hand 2 with each card, the posterior over opponents that hand "
        "1 leaves, and the best response to that posterior (docs/learning.md, \"Does it probe?\")."),
        formatter_class=fmt)
    _add_params(p)
    p.add_argument("--policy", required=True, metavar="DIR", help="the policy folder (a `mage train` output's best/)")
    p.add_argument("--csv", metavar="FILE", help="also write the rows to this CSV file")
    p.set_defaults(func=_cmd_kuhn_probe)


def _cmd_kuhn_analyze(args: argparse.Namespace) -> int:
    from mage_core.stages.analyze import run

    return run("kuhn_poker", args.params, args.overrides, opponents=args.opponent, meta_hands=args.meta_hands)


def _cmd_kuhn_probe(args: argparse.Namespace) -> int:
    from mage_core.stages.kuhn_probe import run

    return run(args.params, args.policy, csv_path=args.csv, overrides=args.overrides)


def add_ttt(sub: Commands, fmt: Formatter) -> None:
    """``mage ttt analyze``: Tic-Tac-Toe best responses."""
    ttt = sub.add_parser("ttt", help="Tic-Tac-Toe best responses (the exploiting ceiling)", formatter_class=fmt)
    ttt_sub = ttt.add_subparsers(dest="ttt_command", metavar="<command>", required=True)
    p = ttt_sub.add_parser("analyze", help="what a perfect exploiting player wins against each opponent",
                           description=(
        "For every Tic-Tac-Toe opponent of the population in params.yaml (or those named with --opponent) and each "
        "agent seat: the expectimax best response to the opponent's move distribution (exact for pattern and random "
        "players, estimated from --samples searches per position for MCTS), for the most wins and for never losing, "
        "each played --games times against the real opponent (win rate with its 95% interval); then the "
        "population-weighted ceiling of the final episode's win rate. About 1-2 minutes for the balanced population."),
        formatter_class=fmt)
    _add_params(p)
    p.add_argument("--opponent", action="append", metavar="NAME", help="analyse this opponent (repeatable)")
    p.add_argument("--samples", type=int, default=200, metavar="N",
                   help="MCTS searches per position for its move distribution (default: %(default)s)")
    p.add_argument("--games", type=int, default=2000, metavar="N",
                   help="games played by each best response against the real opponent (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="seed of the searches and games (default: %(default)s)")
    p.add_argument("--out", metavar="FILE", help="also write the figures as JSON")
    p.set_defaults(func=_cmd_ttt_analyze)


def _cmd_ttt_analyze(args: argparse.Namespace) -> int:
    from mage_core.stages.analyze import run

    return run("tic_tac_toe", args.params, args.overrides, opponents=args.opponent, samples=args.samples,
               games=args.games, seed=args.seed, out=args.out)


# ---- task data: generate it, check it ----

def add_data(sub: Commands, fmt: Formatter) -> None:
    """``mage data generate <name>``: a task's data from params.yaml."""
    data = sub.add_parser("data", help="task data the project generates (the data@<name> DVC stages)",
                          formatter_class=fmt)
    data_sub = data.add_subparsers(dest="data_command", metavar="<command>", required=True)
    p = data_sub.add_parser("generate", help="generate a task's data from params.yaml's data.<name> and check it",
                            description=(
        "Generate the data of a task from params.yaml (data.<name>), check it (WebShop: the scripted expert must "
        "buy every goal with score 1; ALFWorld: every game is won by alfworld's expert, then its walkthrough is "
        "replayed; exit 1 otherwise) and only then move it to --out (default data/<name>), so a failed or "
        "interrupted run leaves the previous data untouched. The DVC stage data@<name> runs this."),
        formatter_class=fmt)
    p.add_argument("name", choices=_data_tasks(), help="the task whose data to generate")
    p.add_argument("--out", metavar="DIR", help="destination folder (default: data/<name>)")
    _add_params(p)
    p.set_defaults(func=_cmd_data_generate)


def _data_tasks() -> list[str]:
    """The tasks that read data files (``Task.data``), in registry order."""
    from mage_core.envs.registry import GAMES, task

    return [name for name in GAMES if task(name).data is not None]


def _cmd_data_generate(args: argparse.Namespace) -> int:
    from mage_core.config import load_config
    from mage_core.envs.registry import resolve, task

    cfg = load_config(args.params, args.overrides)
    generate = resolve(task(args.name).data.generate)  # a data task: the parser's choices (_data_tasks)
    return generate(cfg, args.out or f"data/{args.name}")


def add_alfworld(sub: Commands, fmt: Formatter) -> None:
    """``mage alfworld generate|check``: ALFWorld games made offline."""
    alf = sub.add_parser("alfworld", help="ALFWorld games made offline: generate them, check them",
                         formatter_class=fmt)
    alf_sub = alf.add_subparsers(dest="alfworld_command", metavar="<command>", required=True)
    p = alf_sub.add_parser("generate", help="write expert-checked ALFWorld games of the six task types",
                           description=(
        "Write ALFWorld games (initial_state.pddl, traj_data.json, game.tw-pddl) of the six task types from the "
        "floor plans and object tables the alfworld wheel ships, into the official split folders: train and "
        "valid_seen on ALFRED's training floor plans, valid_unseen (out of distribution) on its test floor plans. "
        "A game is kept only if alfworld's hand-coded expert wins it (1-10 s a game). Needs the alfworld extra."),
        formatter_class=fmt)
    p.add_argument("--out", required=True, metavar="DIR", help="folder to write the split folders into")
    p.add_argument("--seed", type=int, default=0, help="generator seed (default: %(default)s)")
    p.add_argument("--train", type=int, default=4, metavar="N", help="train games per task type (default: %(default)s)")
    p.add_argument("--valid-seen", type=int, default=2, metavar="N",
                   help="in-distribution evaluation games per task type (default: %(default)s)")
    p.add_argument("--valid-unseen", type=int, default=2, metavar="N",
                   help="out-of-distribution evaluation games per task type (default: %(default)s)")
    p.set_defaults(func=_cmd_alfworld_generate)
    p = alf_sub.add_parser("check", help="replay every game's walkthrough in the real engine",
                           description=(
        "Replay the stored walkthrough of every game.tw-pddl under DIR in TextWorld's PDDL engine with ALFWorld's "
        "wrappers (no expert); exit 1 naming the games whose walkthrough does not win."), formatter_class=fmt)
    p.add_argument("folder", metavar="DIR", help="a folder of games (generated, or the official json_2.1.1)")
    p.set_defaults(func=_cmd_alfworld_check)


def _cmd_alfworld_generate(args: argparse.Namespace) -> int:
    from mage_core.envs.alfworld.commands import run_generate

    return run_generate(args.out, args.seed, args.train, args.valid_seen, args.valid_unseen)


def _cmd_alfworld_check(args: argparse.Namespace) -> int:
    from mage_core.envs.alfworld.commands import check

    return check(args.folder)


def add_webshop(sub: Commands, fmt: Formatter) -> None:
    """``mage webshop generate|check``: WebShop catalogues."""
    shop = sub.add_parser("webshop", help="WebShop catalogues: generate one, check one", formatter_class=fmt)
    shop_sub = shop.add_subparsers(dest="webshop_command", metavar="<command>", required=True)
    p = shop_sub.add_parser("generate", help="write a WebShop catalogue in the official file schema",
                            description=(
        "Write items_shuffle.json, items_ins_v2.json and items_human_ins.json (the official WebShop schema) for "
        "products of six in-domain and two out-of-domain categories, each with shopping instructions that pick it "
        "out of look-alikes (two of its attributes, one value per option type). No download; under a second."),
        formatter_class=fmt)
    p.add_argument("--out", required=True, metavar="DIR", help="folder to write the three files into")
    p.add_argument("--seed", type=int, default=0, help="generator seed (default: %(default)s)")
    p.add_argument("--products-per-category", type=int, default=40, metavar="N",
                   help="products in each of the 8 categories (default: %(default)s)")
    p.add_argument("--instructions-per-product", type=int, default=3, metavar="N",
                   help="shopping instructions (goals) per product (default: %(default)s)")
    p.set_defaults(func=_cmd_webshop_generate)
    p = shop_sub.add_parser("check", help="load a catalogue, play the scripted expert on every goal",
                            description=(
        "Load a WebShop catalogue folder (generated, or the official *_1000.json files), print its train / eval / "
        "ood splits, play the scripted expert on every goal (each must be bought with score 1; exit 1 otherwise) "
        "and a random shopper on up to 200 goals of each split for comparison."), formatter_class=fmt)
    p.add_argument("folder", metavar="DIR", help="the catalogue folder")
    p.add_argument("--seed", type=int, default=233,
                   help="seed of prices in a range, price limits and the goal order (official: %(default)s)")
    p.add_argument("--num-eval", type=int, default=500, metavar="N",
                   help="in-domain goals of the eval split, the first N (verl-agent: %(default)s)")
    p.add_argument("--num-select", type=int, default=100, metavar="N",
                   help="in-domain goals of the select split, the next N (default: %(default)s)")
    p.add_argument("--skip-unknown-goals", action="store_true",
                   help="ignore instructions for products the products file lacks, as the official loader does "
                        "(needed with the official 1000-product file); the count is printed")
    p.set_defaults(func=_cmd_webshop_check)


def _cmd_webshop_generate(args: argparse.Namespace) -> int:
    from mage_core.envs.webshop.commands import run_generate

    return run_generate(args.out, args.seed, args.products_per_category, args.instructions_per_product)


def _cmd_webshop_check(args: argparse.Namespace) -> int:
    from mage_core.envs.webshop.commands import run_check

    return run_check(args.folder, args.seed, args.num_eval, args.skip_unknown_goals, args.num_select)
