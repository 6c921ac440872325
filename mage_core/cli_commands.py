"""The sub-commands of ``mage`` that every task shares (an experiment's stages, the pipelines, the
commands around the runs), each a part: ``add_<command>(sub, fmt)`` adds its parser (cli.py's
build_parser calls them in order), ``_cmd_<command>`` runs it. The task-specific sub-commands (the
games' exact analyses, the task data) are cli_tasks.py's, built on this module's helpers.

Like cli.py this imports only argparse: each command imports its stage when it runs.
"""

from __future__ import annotations

import argparse
from typing import TypeAlias

#: A part's arguments: the sub-command table it adds to (an ``add_subparsers``), the sub-commands' formatter.
Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
Formatter: TypeAlias = "type[argparse.HelpFormatter]"


def _add_params(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--params", default="params.yaml", metavar="PATH", help="experiment parameters (default: %(default)s)"
    )
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
                   help="override one params key (dotted, YAML value), e.g. --set algorithm.preset=gigpo; repeatable")


def _add_run(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run", metavar="NAME",
                   help="act as run NAME of reproduce.runs (its env, method, reproduce.iterations and its own "
                        "overrides; --set still wins); how dvc.yaml calls the stages")


# ---- an experiment's stages ----

def add_validate(sub: Commands, fmt: Formatter) -> None:
    """``mage validate``: check params.yaml (and dvc.runs.yaml)."""
    p = sub.add_parser("validate", help="check params.yaml and summarise it", description=(
        "Validate params.yaml against the schema (mage_core/config/). Prints every problem with its dotted "
        "key and exits 2, or prints the resolved games and opponent populations. In the project's folder it also "
        "checks that dvc.runs.yaml (the per-run inputs dvc.yaml reads) matches reproduce.runs: exit 1 when stale."),
        formatter_class=fmt)
    _add_params(p)
    p.add_argument("--sync-dvc", action="store_true",
                   help="rewrite a stale dvc.runs.yaml from reproduce.runs (for `dvc repro` without `mage reproduce`)")
    p.set_defaults(func=_cmd_validate)


def _cmd_validate(args: argparse.Namespace) -> int:
    from mage_core.stages.validate import run

    return run(args.params, args.overrides, args.sync_dvc)


def add_code_deps(sub: Commands, fmt: Formatter) -> None:
    """``mage code-deps``: the manifests of each kind of stage's code (dvc.yaml's ``code`` stage)."""
    p = sub.add_parser("code-deps", help="write the manifest of the code each kind of stage can load (DVC's code stage)",
                       description=(
        "For every kind of stage (train, evaluate, sft and data of each task, the report) write OUT/<kind>-<task>.md5: "
        "the md5 and path of every file of mage_core its command can load (the import closure of its entry point, "
        "mage_core/stages/code_deps.py), in md5sum form. Each stage of dvc.yaml depends on its manifest, so an edit "
        "reruns exactly the stages whose code it touched. dvc.yaml's `code` stage runs this."), formatter_class=fmt)
    p.add_argument("--out", default="artifacts/code", metavar="DIR", help="where to write them (default: %(default)s)")
    p.add_argument("--project", default=".", metavar="DIR",
                   help="the folder holding mage_core (default: %(default)s)")
    p.set_defaults(func=_cmd_code_deps)


def _cmd_code_deps(args: argparse.Namespace) -> int:
    from pathlib import Path

    from mage_core.stages.code_deps import write_manifests

    project = Path(args.project).resolve()
    if not (project / "mage_core").is_dir():
        from mage_core.config import ConfigError

        raise ConfigError("command line", [f"--project: {project} holds no mage_core folder"])
    written = write_manifests(project, Path(args.out))
    print(f"{len(written)} manifests of {project / 'mage_core'} -> {args.out}")
    return 0


def add_tournament(sub: Commands, fmt: Formatter) -> None:
    """``mage tournament``: two players against each other."""
    from mage_core.envs.registry import two_player_games

    p = sub.add_parser("tournament", help="play two players against each other, with confidence intervals",
                       description=(
        "Play head-to-head matches between two players of a two-player game with alternating seats and fixed "
        "seeds, and print win/draw/loss rates with 95% Wilson intervals and the mean payoff (Kuhn Poker: chips "
        "per hand). Without --game/--a/--b it plays every match in params.yaml (tournament.matches). Players are "
        "opponent names, e.g. random (the uniform-random agent), minimax, mcts-100, pattern-corners, "
        "conservative, cfr, equilibrium-1/6 (see `mage validate`)."), formatter_class=fmt)
    _add_params(p)
    p.add_argument("--game", choices=two_player_games(), help="game of a single ad-hoc match")
    p.add_argument("--a", metavar="PLAYER", help="player A of a single ad-hoc match")
    p.add_argument("--b", metavar="PLAYER", help="player B of a single ad-hoc match")
    p.add_argument("--games", type=int, metavar="N", help="games per match (overrides params)")
    p.add_argument("--seed", type=int, help="seed (default: params.yaml seed)")
    p.add_argument("--out", metavar="PATH", default="reports/tournament.json",
                   help="where to write the results as JSON (default: %(default)s; '-' for none)")
    p.set_defaults(func=_cmd_tournament)


def _cmd_tournament(args: argparse.Namespace) -> int:
    from mage_core.stages.tournament import run

    return run(args.params, game=args.game, player_a=args.a, player_b=args.b,
               num_games=args.games, seed=args.seed, out=args.out, overrides=args.overrides)


def add_train(sub: Commands, fmt: Formatter) -> None:
    """``mage train``: train a policy (resumable)."""
    p = sub.add_parser("train", help="train a policy with a method preset (resumable)", description=(
        "Train the policy of params.yaml (model, policy, rollout, algorithm, train sections) on env.name against "
        "its population. algorithm.preset picks the method: mage, lamer, gigpo, grpo or an ablation. Prints a "
        "progress bar; writes metrics.jsonl, checkpoints (safetensors + optimizer/RNG state, atomic), the best "
        "policy by evaluation and summary.json under --out. Kill it at any point and rerun with --resume to "
        "continue exactly where the last checkpoint left off. With backend.ranks N > 1 it runs itself as N "
        "data-parallel processes under torchrun (rank 0 writes the outputs)."), formatter_class=fmt)
    _add_params(p)
    p.add_argument("--out", metavar="DIR", help="output folder (default: train.output_dir)")
    p.add_argument("--resume", nargs="?", const="yes", choices=["yes", "auto"],
                   help="continue from the latest checkpoint in --out (its configuration must match: a mismatch "
                        "stops naming the differing keys); --resume auto (pipelines): continue an unfinished run "
                        "of the same params and code, keep a finished one of the same params, code and input "
                        "files whose outputs are as it wrote them, else move the old run to --out's superseded/ "
                        "and start afresh (nothing is deleted)")
    p.add_argument("--iterations", type=int, metavar="N", help="override train.iterations")
    _add_run(p)
    p.add_argument("--time-budget", type=float, metavar="MIN",
                   help="override train.time_budget_minutes (stop, checkpoint and evaluate after MIN minutes)")
    p.set_defaults(func=_cmd_train)


def _cmd_train(args: argparse.Namespace) -> int:
    from mage_core.stages.train import run

    resume = {None: False, "yes": True, "auto": "auto"}[args.resume]
    return run(args.params, out=args.out, resume=resume, iterations=args.iterations,
               time_budget_minutes=args.time_budget, overrides=args.overrides, run=args.run)


def add_sft(sub: Commands, fmt: Formatter) -> None:
    """``mage sft``: the warm start by imitation of the task's expert."""
    p = sub.add_parser("sft", help="a warm start: behaviour cloning of the task's expert (single-agent tasks)",
                       description=(
        "Build the policy of params.yaml as `mage train` does and train it to imitate env.name's expert "
        "(Sokoban: an optimal solver; MineSweeper: the least likely mine; WebShop: a shopper that reads the pages and its memory), "
        "warm_start.meta_episodes meta-episodes asked exactly as the policy is asked, a share of the first "
        "attempt's steps detours (warm_start.detour). Then plays the selection set and writes model/ and "
        "summary.json under --out. --task NAME: the warm start of NAME's entry in warm_start.tasks (the "
        "sft@NAME stage of dvc.yaml)."), formatter_class=fmt)
    _add_params(p)
    p.add_argument("--out", metavar="DIR", required=True, help="output folder (model/, summary.json)")
    p.add_argument("--task", metavar="NAME", help="params as the warm start of NAME in warm_start.tasks "
                   "(env.name and the keys its entry sets)")
    _add_run(p)
    p.set_defaults(func=_cmd_sft)


def _cmd_sft(args: argparse.Namespace) -> int:
    from mage_core.stages.sft import run

    return run(args.params, args.overrides, args.out, args.run, args.task)


def add_evaluate(sub: Commands, fmt: Formatter) -> None:
    """``mage evaluate``: a saved policy on the fixed suites."""
    p = sub.add_parser("evaluate", help="evaluate a saved policy on the fixed in-domain and out-of-domain suites",
                       description=(
        "Play a saved policy (a `mage train` output's best/ or policy-init/, or any local Hugging Face model "
        "folder: a prompting-only policy) on fixed-seed suites, identical on every run: in-domain (the training "
        "population) and out-of-domain (evaluation.ood: Tic-Tac-Toe vs MCTS-1000, Kuhn vs sampled CFR and argmax "
        "CFR, Sokoban with 1 and 3 boxes). Writes trials.parquet (one row per episode, checked by its data "
        "contract before it is written) and metrics.json (Pass@k, success, draw and reward per episode index, "
        "per opponent and seat, with 95% intervals; for Kuhn the exploitation ratio) under --out."),
        formatter_class=fmt)
    _add_params(p)
    _add_run(p)
    p.add_argument("--policy", required=True, metavar="DIR", help="the policy folder to evaluate")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder for trials.parquet and metrics.json")
    p.add_argument("--suites", default="all", choices=["in_domain", "ood", "all"],
                   help="which suites to play (default: %(default)s)")
    p.add_argument("--per-pair", type=int, metavar="N",
                   help="meta-episodes per (opponent, seat) (Sokoban: levels) per suite (default: "
                        "reproduce.eval_per_pair with --run, else evaluation.meta_episodes_per_opponent_seat)")
    p.set_defaults(func=_cmd_evaluate)


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from mage_core.stages.evaluate import run

    return run(args.params, policy=args.policy, out=args.out, which=args.suites, per_opponent_seat=args.per_pair,
               overrides=args.overrides, run=args.run)


# ---- whole pipelines: Prefect flows over the DVC graph ----

def add_reproduce(sub: Commands, fmt: Formatter) -> None:
    """``mage reproduce``: the paper reproduction as one flow."""
    p = sub.add_parser("reproduce", help="the paper reproduction: every stage of dvc.yaml as one Prefect flow",
                       description=(
        "Run the stage graph of dvc.yaml (train and evaluate every run of reproduce.runs, then the report) as "
        "one Prefect flow, one task run per stage, in DVC's order. Stages DVC finds up to date are skipped, so a "
        "rerun after a crash resumes where it stopped. Every executed stage is an MLflow child run of the flow's "
        "run. Without --profile it runs here on params.yaml (the CPU default); --profile smoke runs the named "
        "profile of reproduce.profiles in its own workspace, artifacts/profiles/<name>, leaving this one "
        "untouched. Prints where the report, the MLflow UI and the DVC lineage are."), formatter_class=fmt)
    p.add_argument("--params", default="params.yaml", metavar="PATH",
                   help="experiment parameters (default: %(default)s); its folder is the project")
    p.add_argument("--profile", metavar="NAME", help="a profile of reproduce.profiles, e.g. smoke")
    p.add_argument("--evaluate-only", action="store_true",
                   help="the evaluate flow: rerun the evaluation stages and the report on the trained checkpoints "
                        "(e.g. after changing evaluation suites), training nothing")
    p.set_defaults(func=_cmd_reproduce)


def _cmd_reproduce(args: argparse.Namespace) -> int:
    from mage_core.stages.reproduce import run

    return run(args.params, profile=args.profile, flow="evaluate" if args.evaluate_only else "reproduce")


def add_sweep(sub: Commands, fmt: Formatter) -> None:
    """``mage sweep``: an ablation grid as one flow."""
    p = sub.add_parser("sweep", help="an ablation grid (named in params.yaml, or --vary KEY=[...]) as one flow",
                       description=(
        "Run a grid of training runs and their evaluations as one Prefect flow. A grid is sweep.grids.NAME in "
        "params.yaml (the paper's ablations: reward_design, population, grouping, anchor; beyond the paper: "
        "opponent_population, exploration) and/or --vary "
        "KEY=[v1,v2] items; its points are the product of the varied values. Every point is validated before "
        "anything runs, then trained for reproduce.iterations and evaluated like a reproduce run, in a DVC "
        "workspace of its own (artifacts/sweeps/<sweep>/<point>), at most sweep.max_concurrent at once (locally "
        "also at most the cores; on Ray with --ray or RAY_ADDRESS). A rerun skips finished stages. Writes "
        "reports/ablations/<sweep>/ (summary.md, summary.csv, bars.png); with --profile, the summary stays in "
        "the sweep's folder. MLflow: the sweep is a parent run, each point a child, each stage a grandchild."),
        formatter_class=fmt)
    _add_params(p)
    p.add_argument("grid", nargs="?", help="a grid of sweep.grids (omit to sweep only --vary)")
    p.add_argument("--vary", action="append", default=[], metavar="KEY=[V1,V2]",
                   help="vary a dotted key over a YAML list, e.g. --vary train.learning_rate=[0.001,0.0003]; "
                        "repeatable (the grid is the product)")
    p.add_argument("--name", help="the sweep's name (default: the grid's, or 'custom')")
    p.add_argument("--profile", metavar="NAME", help="start every point from this profile of reproduce.profiles")
    p.add_argument("--max-concurrent", type=int, metavar="N", help="points at once (default: sweep.max_concurrent)")
    p.add_argument("--ray", action="store_true",
                   help="run the stages as Ray tasks: on RAY_ADDRESS if set, else on a local Ray instance")
    p.add_argument("--dry-run", action="store_true", help="validate and list the points, run nothing")
    p.set_defaults(func=_cmd_sweep)


def _cmd_sweep(args: argparse.Namespace) -> int:
    from mage_core.stages.sweep import run

    return run(args.params, grid=args.grid, vary=args.vary, name=args.name, profile=args.profile,
               overrides=args.overrides, max_concurrent=args.max_concurrent, ray=args.ray, dry_run=args.dry_run)


# ---- around the runs: before, while and after ----

def add_doctor(sub: Commands, fmt: Formatter) -> None:
    """``mage doctor``: check a profile before launch."""
    p = sub.add_parser("doctor", help="check a profile before launch: backends, GPUs, model folder, memory",
                       description=(
        "Check params.yaml (or a profile of reproduce.profiles) before a launch: the backends it names are "
        "installed and built, the GPUs torch sees and their memory against backend.gpus, the model folder "
        "(config.json readable, weights, tokenizer), and an estimate of the memory per GPU of a training step "
        "(weights, gradients, optimizer state under backend.zero_stage, reference policy, activations, logits) "
        "and of the rollout KV cache. Every problem is printed with its fix; exit 1 when there is one."),
        formatter_class=fmt)
    _add_params(p)
    p.add_argument("--profile", metavar="NAME", help="check this profile of reproduce.profiles, e.g. paper_kuhn_poker")
    p.set_defaults(func=_cmd_doctor)


def _cmd_doctor(args: argparse.Namespace) -> int:
    from mage_core.stages.doctor import run

    return run(args.params, profile=args.profile, overrides=args.overrides)


def add_ui(sub: Commands, fmt: Formatter) -> None:
    """``mage ui``: the MLflow UI."""
    p = sub.add_parser("ui", help="the MLflow UI on this project's tracking store (127.0.0.1)", description=(
        "Start the MLflow UI on MLFLOW_TRACKING_URI, or else this project's embedded store (mlflow.db), "
        "listening on 127.0.0.1 only, and print a link to the experiment's training runs (the UI's "
        "'Machine learning' mode). Runs until Ctrl-C or SIGTERM, which stop its server processes too."),
        formatter_class=fmt)
    p.add_argument("--params", default="params.yaml", metavar="PATH",
                   help="experiment parameters (default: %(default)s); its folder is the project")
    p.add_argument("--host", default="127.0.0.1", help="default: %(default)s")
    p.add_argument("--port", type=int, default=5000, help="default: %(default)s")
    p.set_defaults(func=_cmd_ui)


def _cmd_ui(args: argparse.Namespace) -> int:
    from mage_core.stages.ui import run

    return run(args.params, host=args.host, port=args.port)


def add_report(sub: Commands, fmt: Formatter) -> None:
    """``mage report``: tables and plots of the evaluated runs."""
    p = sub.add_parser("report", help="tables and plots of the evaluated runs (reports/)", description=(
        "Aggregate the evaluations of reproduce.runs (artifacts/eval/<run>) and their training logs "
        "(artifacts/train/<run>) into reports/: a Table-1-style table (methods x environments, final-episode "
        "success, Kuhn chips, Pass@k), per-opponent tables, adaptation curves (success or chips by episode "
        "index), training curves, metrics.json and report.md linking them."), formatter_class=fmt)
    _add_params(p)
    p.add_argument("--eval-root", default="artifacts/eval", metavar="DIR", help="default: %(default)s")
    p.add_argument("--train-root", default="artifacts/train", metavar="DIR", help="default: %(default)s")
    p.add_argument("--out", default="reports", metavar="DIR", help="default: %(default)s")
    p.set_defaults(func=_cmd_report)


def _cmd_report(args: argparse.Namespace) -> int:
    from mage_core.stages.report import run

    return run(args.params, eval_root=args.eval_root, train_root=args.train_root, out=args.out,
               overrides=args.overrides)


def add_ablations(sub: Commands, fmt: Formatter) -> None:
    """``mage ablations``: the paper's ablations, summarized with a verdict per claim."""
    p = sub.add_parser("ablations", help="the paper's ablations: a summary per grid, a verdict per claim",
                       description=(
        "Summarize the grids of reproduce.ablations, whose points the reproduction ran as runs of its graph "
        "(artifacts/eval/<grid>-<point>, or the Table 1 run a point equals): per grid a summary (every point, every "
        "setting over its training seeds, each claim of sweep.grids.<grid>.claims with its verdict) and the paper's "
        "Figure 5 as measured; verdicts.csv and section.md (the report's ablation section) for all."),
        formatter_class=fmt)
    _add_params(p)
    p.add_argument("--out", default="reports/paper-ablations", metavar="DIR", help="default: %(default)s")
    p.set_defaults(func=_cmd_ablations)


def _cmd_ablations(args: argparse.Namespace) -> int:
    from mage_core.stages.ablations import run

    return run(args.params, out=args.out, overrides=args.overrides)


def add_lineage(sub: Commands, fmt: Formatter) -> None:
    """``mage lineage``: do dvc.lock and reports/ come from this code?"""
    p = sub.add_parser("lineage", help="check that dvc.lock and reports/ come from this code and params",
                       description=(
        "Print the checkout's git commit, the digest of dvc.lock's entries, what reports/report.md says it was "
        "made from, and every code or params dependency whose hash in dvc.lock no longer matches the working "
        "tree (`dvc status`). Exit 0 when the committed lineage describes this code, 1 when it does not (run "
        "`make run` and commit reports/ and dvc.lock)."), formatter_class=fmt)
    p.add_argument("--project", default=".", metavar="DIR", help="the project folder (default: %(default)s)")
    p.add_argument("--report", default=None, metavar="PATH", help="the report to check (default: reports/report.md)")
    p.set_defaults(func=_cmd_lineage)


def _cmd_lineage(args: argparse.Namespace) -> int:
    from mage_core.stages.lineage import run

    return run(args.project, report=args.report)
