"""``mage evaluate``: a saved policy on the fixed evaluation suites.

Composition root: config -> policy (a ``mage train`` output's ``best/`` or
``policy-init/``, or any local HF checkpoint: a prompting-only policy) ->
suites (in-domain and out-of-domain, ``evaluation.suites``) -> outputs under
``--out``:

- ``trials.parquet``: the trial table (``evaluation.trials``), validated by
  its data contract before it is written;
- ``metrics.json``: per suite, per (opponent, seat) and population-weighted:
  mean reward (Kuhn: chips) and success/draw rate per episode index, Pass@k,
  each with a 95% interval; for Kuhn the exact best-response value, the
  final hand's ceiling with the opponent known and the exploitation ratio
  (final-episode chips over that ceiling, where it is not near 0), the suite's
  exact final-hand ceilings under its protocol (``all/ceiling_*``: best fixed
  strategy, play fixed then respond, Bayes-optimal, opponent known; with early
  stop only the last two; ``mage_core.envs.kuhn_poker.ceilings``, reached through the task:
  ``Task.exact_values``), the
  policy's first-hand opening bet probability per card where it acts first
  (``all/opening_bet_{J,Q,K}_ep1``: does it probe?), its hand-2 opening bets after a hand 1
  that revealed the opponent or did not (``all/bet_<card>_ep2_after_<opponent>``,
  ``all/bet_<card>_ep2_unrevealed``, ``all/ep2_bayes_agreement``: suites of deterministic
  opponents, ``envs.kuhn_poker.second_hand``; ``Task.strategy_probes``), and, for suites of
  deterministic opponents, the greedy policy's exact chips (``chips_exact_ep{k}``,
  every deal enumerated: ``mage_core.envs.kuhn_poker.exact_greedy``);
- ``transcripts.txt``: sample meta-episodes of each suite, prompts and responses.

The three files are built in a staging folder next to ``--out`` and swapped in
together once all are written: an existing ``--out`` is replaced whole, never left
holding a mix of two evaluations; nothing is written if the contract fails.
``--out`` is checked before any work (``check_out_dir``). With
``tracking.mlflow`` the run (params, metrics, the three files) goes to MLflow.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any, Sequence

from rich.console import Console

from mage_core.config import Config, ConfigError, load_config
from mage_core.envs.registry import task
from mage_core.evaluation.contracts import trial_rules, validate
from mage_core.evaluation.meta_eval import summarize_trials
from mage_core.evaluation.suites import WHICH, Suite, suites_for
from mage_core.evaluation.trials import TRIAL_COLUMNS, trial_rows
from mage_core.io.atomic import (check_writable, replace_dir, writable_problem, write_bytes_atomic,
                                 write_json_atomic, write_text_atomic)
from mage_core.io.dotted import flatten
from mage_core.rollout.transcript import transcripts
from mage_core.tracking.runs import StageIdentity, check_tracking, open_mlflow_run

console = Console()


def reward_bounds(cfg: Config, game: str) -> tuple[float, float]:
    """Bounds of one episode's task reward R_k (docs/method.md section 3), as the task declares them."""
    return task(game).reward_bounds(getattr(cfg.env, game))


def exact_suite_figures(cfg: Config, suite: Suite, metrics: dict[str, float], k: int, restart: str,
                        early_stop: bool) -> dict[str, float]:
    """Exact figures a suite's scores are read against, for a task with exact values, ``k``
    episodes with ``restart``, with or without early stop: the task's own
    (``Task.exact_values.suite``: Kuhn's ceilings, ``all/ceiling_*``, and per (opponent, seat)
    ``best_response_value`` and ``ceiling_known``), then ``exploitation_ratio`` per group and
    for ``all``: the final episode's score over ``ceiling_known``, only where that ceiling is
    meaningful (``stats.ratio_to_ceiling``) and exceeds what an equilibrium secures in the
    group's seats by at least ``MIN_RATIO_CEILING``: an opponent there is exploitable."""
    from mage_core.envs.registry import resolve
    from mage_core.evaluation.stats import MIN_RATIO_CEILING, ratio_to_ceiling

    spec = task(cfg.env.name)
    assert spec.exact_values is not None
    out, secured = resolve(spec.exact_values.suite)(
        suite.entries, suite.weights() or {}, cfg.opponents.settings(), k, restart, early_stop,
        lambda line: console.print(f"{suite.name}: {line}"))
    for group, floor in secured.items():
        ceiling = out.get(f"{group}/ceiling_known")
        if ceiling is None or not ceiling - floor >= MIN_RATIO_CEILING:  # (NaN too)
            continue
        ratio = ratio_to_ceiling(metrics.get(f"{group}/{spec.headline}_ep{k}"), ceiling)
        if ratio is not None:
            out[f"{group}/exploitation_ratio"] = ratio
    return out


def evaluate(cfg: Config, policy_dir: Path, out_dir: Path, which: str = "all",
             per_opponent_seat: int | None = None, run_name: str | None = None) -> dict[str, Any]:
    """Run the suites; write ``trials.parquet`` and ``metrics.json``; return the metrics.
    ``run_name``: the run of ``reproduce.runs`` (or sweep point) this is, for MLflow."""
    import pandas as pd

    from mage_core.backends import require_built

    require_built(cfg.backend.generator)
    from mage_core.stages.train_model import make_codec, make_generator
    from mage_core.trainers.meta_rl import MetaRLTrainer, reward_unit

    model, tokenizer = _checked_policy(cfg, policy_dir, out_dir)
    generator = make_generator(cfg, tokenizer, policy_dir, model, copy_model=False)
    trainer = MetaRLTrainer(cfg, None, generator, make_codec(tokenizer, cfg.policy))
    game, k = cfg.env.name, trainer.eval_settings.num_episodes
    spec = task(game)
    unit_scale, unit = reward_unit(cfg, game)
    n = per_opponent_seat or cfg.evaluation.meta_episodes_per_opponent_seat
    suites = suites_for(cfg, which)  # type: ignore[arg-type]
    trainer.check_suite_sizes(suites, n)
    rows: list[dict[str, Any]] = []
    metrics: dict[str, float] = {}
    timings: dict[str, float] = {}  # eval/time/*: MLflow and the console, never metrics.json (a cached output)
    samples: list[str] = []
    with trainer, contextlib.closing(generator):  # the Ray rollout workers (rollout.workers > 0), vLLM's engine
        for suite in suites:
            started = time.perf_counter()
            with console.status(f"evaluating suite {suite.name} ({n} meta-episodes per opponent and seat)"):
                metas = trainer.run_suite(suite, n)
            samples.append(f"# ===== suite {suite.name}\n" + transcripts(metas, trainer.codec.decode))
            suite_rows = trial_rows(metas, suite.name, unit_scale)
            rows += suite_rows
            summary = _suite_summary(cfg, trainer, suite, suite_rows, k, unit, metas)
            metrics.update({f"eval/{suite.name}/{key}": v for key, v in summary.items()})
            headline = summary[f"all/{spec.headline}_ep{k}"]
            seconds = time.perf_counter() - started
            timings[f"eval/time/{suite.name}_s"] = seconds
            timings[f"eval/time/{suite.name}_meta_episodes_per_s"] = len(metas) / seconds
            console.print(f"{suite.name}: final-episode {spec.headline} "
                          f"{headline:+.4f} ({len(metas)} meta-episodes, {seconds:.1f} s)")
    frame = pd.DataFrame(rows, columns=list(TRIAL_COLUMNS))
    opponents = sorted({e.opponent for s in suites for e in s.entries} | {"none"})
    validate(frame, "trials", trial_rules(k, reward_bounds(cfg, game), opponents, [s.name for s in suites]))
    summary_file = {"game": game, "episodes_per_meta_episode": k, "policy": str(policy_dir), "metrics": metrics,
                    # how the meta-episodes were played (what the Kuhn ceilings assume)
                    "protocol": {"restart": trainer.eval_settings.restart,
                                 "early_stop": trainer.eval_settings.early_stop},
                    # the report set: never the set that picked the policy
                    "report_set": {"seed": cfg.evaluation.seed, "meta_episodes_per_opponent_seat": n}}
    with replace_dir(out_dir) as staging:  # the whole set, swapped in at once: never a mix of two evaluations
        _write_outputs(staging, frame, summary_file, samples)
    if cfg.tracking.mlflow:  # the files from where they now are
        _track(cfg, policy_dir, out_dir, which, n, {**metrics, **timings}, run_name)
    return metrics


def _checked_policy(cfg: Config, policy_dir: Path, out_dir: Path) -> tuple[Any, Any]:
    """The model (None where the generator loads the weights itself) and tokenizer in
    ``policy_dir``, once the task's data, ``--out``, the policy's files and the tracking
    store are checked: each stops here, before any work."""
    import torch

    from mage_core.policy.model import load_policy, load_tokenizer, verify_policy
    from mage_core.stages.task_data import check_task_data

    check_task_data(cfg, "evaluate")  # WebShop's catalogue, before anything is loaded or written
    check_out_dir(out_dir)  # a folder that cannot be written stops now, not after the evaluation
    if not (policy_dir / "config.json").is_file():
        raise ConfigError("command line", [f"--policy: {policy_dir} holds no model (config.json missing); pass a "
                                           "`mage train` output's best/ or policy-init/, or a local HF model folder"])
    try:  # every backend reads these files: a corrupted policy stops here, before any work
        verify_policy(policy_dir)
    except ValueError as err:
        raise ConfigError("command line", [f"--policy: {err}"]) from None
    if cfg.tracking.mlflow:
        check_tracking(Path.cwd())  # an unreachable tracking server fails now, before any work
    torch.set_num_threads(cfg.train.num_threads)
    try:  # a folder without a manifest (downloaded) that is truncated or incomplete: one line, no work
        if cfg.backend.generator == "hf" or cfg.rollout.workers > 0:  # Ray actors copy an in-memory model
            model, tokenizer = load_policy(policy_dir, dtype=getattr(torch, cfg.model.dtype), verified=True)
        else:  # vLLM loads the weights itself; an OpenAI-compatible server holds them
            model, tokenizer = None, load_tokenizer(policy_dir)
    except (FileNotFoundError, ValueError) as err:
        raise ConfigError("command line", [f"--policy: {' '.join(str(err).split())[:400]}"]) from None
    return model, tokenizer


def _suite_summary(cfg: Config, trainer: Any, suite: Suite, suite_rows: list[dict[str, Any]], k: int,
                   unit: str, metas: Sequence[Any]) -> dict[str, float]:
    """One suite's figures (``summarize_trials``, with intervals); for a task with exact
    values also its exact figures (Kuhn's ceilings) and the greedy policy's exact value, for a
    task with strategy probes what they read of the policy (Kuhn's opening bets), and for a
    task with a hidden state a player could know (``Task.known_ceiling``) the share of the
    suite's tasks such a player wins, ``all/ceiling_known`` (MineSweeper: the board known)."""
    from mage_core.envs.registry import resolve
    from mage_core.trainers import probes

    summary = summarize_trials(suite_rows, k, unit, suite.weights(), intervals=True)
    spec = task(cfg.env.name)
    if spec.known_ceiling is not None and metas:
        known = resolve(spec.known_ceiling)
        summary["all/ceiling_known"] = sum(bool(known(m.env)) for m in metas) / len(metas)
    if spec.exact_values:
        summary.update(exact_suite_figures(cfg, suite, summary, k, trainer.eval_settings.restart,
                                           trainer.eval_settings.early_stop))
        # The greedy policy's exact value where the suite's opponents are deterministic.
        exact = probes.exact_greedy_values(trainer, list(suite.entries))
        summary.update({key.removeprefix("eval/"): v for key, v in exact.items()})
    if spec.strategy_probes:  # does it probe? does hand 2 use what hand 1 showed?
        summary.update(probes.suite_probes(trainer, list(suite.entries)))
    return summary


#: What ``mage evaluate`` writes into ``--out`` (the whole folder's content).
OUTPUTS = ("trials.parquet", "metrics.json", "transcripts.txt")


def _write_outputs(folder: Path, frame: Any, metrics_file: dict[str, Any], samples: list[str]) -> None:
    write_bytes_atomic(folder / "trials.parquet", frame.to_parquet(index=False))
    write_json_atomic(folder / "metrics.json", metrics_file)
    write_text_atomic(folder / "transcripts.txt", "\n".join(samples))


def check_out_dir(out_dir: Path) -> None:
    """``--out`` before any work: its parent must take a new folder (the outputs are built
    next to it and swapped in), and an existing folder must hold only an earlier
    evaluation's outputs (the swap replaces the whole folder)."""
    problem = None
    if out_dir.exists() and not out_dir.is_dir():
        problem = f"{out_dir} is a file, not a folder; choose another --out"
    elif out_dir.is_dir():
        foreign = sorted(p.name for p in out_dir.iterdir() if p.name not in OUTPUTS)
        if foreign:
            shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
            problem = (f"{out_dir} holds files `mage evaluate` does not write ({shown}); its outputs replace the "
                       "whole folder: choose a new or empty folder, or one an earlier `mage evaluate` wrote")
    if problem is None:
        try:
            check_writable(out_dir.resolve().parent)
        except OSError as err:
            problem = f"{out_dir}: {writable_problem(err)}"
    if problem is not None:
        raise ConfigError("command line", [f"--out: {problem}"])


def _track(cfg: Config, policy_dir: Path, out_dir: Path, which: str, n: int, metrics: dict[str, float],
           run_name: str | None = None) -> None:
    """The MLflow run: params, metrics, the three files, and what makes runs compare
    (``mage_core.tracking.compare``: Table 1's K-independent keys, the adaptation curves,
    the registered model evaluated, the saved views)."""
    from mage_core.evaluation.aggregate import ENV_LABELS
    from mage_core.stages.train_resume import config_digest
    from mage_core.tracking.compare import log_comparison

    run = open_mlflow_run("evaluate", cfg.tracking.experiment, config_digest(cfg), Path.cwd(),
                          identity=StageIdentity.of("evaluate", cfg, run_name),
                          system_metrics=cfg.tracking.system_metrics)
    with run:
        run.log_params({**flatten(cfg.model_dump(mode="json")), "evaluate.policy": str(policy_dir),
                        "evaluate.suites": which, "evaluate.per_opponent_seat": n})
        run.log_metrics(0, metrics)
        run.extra("the comparison views", lambda: log_comparison(run, metrics, cfg.env.name, cfg.algorithm.preset,
                                                                 policy_dir, ENV_LABELS))
        for name in OUTPUTS:
            run.log_artifact(out_dir / name)


def run(params: str, policy: str, out: str, which: str = "all", per_opponent_seat: int | None = None,
        overrides: Sequence[str] = (), run: str | None = None) -> int:
    cfg = load_config(params, overrides, run)
    problems = []
    if which not in WHICH:
        problems.append(f"--suites: {which!r} is not one of {', '.join(WHICH)}")
    if per_opponent_seat is not None and per_opponent_seat < 1:
        problems.append(f"--per-pair: must be >= 1, got {per_opponent_seat}")
    if problems:
        raise ConfigError("command line", problems)
    if per_opponent_seat is None and run is not None:  # a run of the reproduction: its own eval size
        per_opponent_seat = cfg.reproduce.eval_per_pair
    from mage_core.stages.out_lock import writer_lock

    with writer_lock(Path(out), f"mage evaluate --out {out}" + (f" --run {run}" if run else "")):
        evaluate(cfg, Path(policy), Path(out), which, per_opponent_seat, run_name=run)
    console.print(f"trial table and metrics written to {out}")
    return 0
