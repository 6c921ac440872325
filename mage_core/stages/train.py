"""``mage train``: train a policy with a method preset, resumable at any point.

Composition root: config -> tokenizer + model -> engine + generator -> trainer.
Outputs under ``--out`` (default ``train.output_dir``):

- ``policy-init/``: the initial policy and tokenizer (embedded default), so a
  resumed run rebuilds exactly the same tokenizer;
- ``checkpoints/step-XXXXXX/``: safetensors weights + optimizer/RNG state,
  written atomically (``mage_core.trainers.checkpoint``);
- ``best/``: the policy with the best evaluation score so far;
- ``metrics.jsonl``: one line per iteration (and per evaluation);
- ``summary.json``: the final evaluation and where everything is;
- ``superseded/<UTC time>/``: the outputs of an earlier run that ``--resume auto``
  did not continue (other params or code, or finished), moved aside, never deleted.

With ``tracking.mlflow`` the run is an MLflow run named and tagged by its stage,
environment, method and seed (``mage_core.tracking.runs.StageIdentity``), sampling
the machine (``tracking.system_metrics``); at its end a trained method's ``best/``
becomes a version of the registered model ``mage-<env>-<method>``
(``tracking.register_models``, ``mage_core.tracking.registry``).

``metrics.jsonl`` and ``summary.json`` are DVC-cached outputs and hold no
wall-clock time (``mage_core.tracking.jsonl.TIMING_PREFIXES``): two runs of the
same seeded training write the same bytes. Timings (``train/time/*``, the total
in ``train/time/total_s``) go to MLflow and the console.

The policy and what runs it are built by ``mage_core.stages.train_model``; what a
checkpoint must match to be resumed, and the output folder, are
``mage_core.stages.train_resume``'s; writing checkpoints and ``best/`` (and registering
it), ``mage_core.stages.train_checkpoints``'s.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Sequence

import numpy as np
import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from mage_core.config import Config, ConfigError, load_config
from mage_core.envs.registry import games_with, resolve, task
from mage_core.evaluation.suites import selection_suite
from mage_core.io.atomic import write_json_atomic, write_text_atomic
from mage_core.io.dotted import flatten
from mage_core.rollout.transcript import transcripts
from mage_core.stages.train_checkpoints import better, register, save_best, save_checkpoint
from mage_core.stages.train_model import build_policy, make_codec, make_engine, make_generator, stage_device
from mage_core.stages.train_resume import (KEPT, RESUME_INDEPENDENT_KEYS, RUN_OUTPUTS, check_out_dir,
                                           checkpoint_to_resume, code_digest, config_differences, config_digest,
                                           move_aside, resume_config, write_finished)
from mage_core.tracking.jsonl import JsonlLogger, without_timings
from mage_core.tracking.runs import RUN_ID_ENV, StageIdentity, StageTracker, interrupted_run, open_mlflow_run
from mage_core.trainers.checkpoint import CheckpointManager, restore_rng, unpack_engine_state
from mage_core.trainers.data_parallel import Ranks, check_rendezvous, launch_command, launched_world
from mage_core.trainers.meta_rl import MetaRLTrainer, TrainState, headline, selection_score

#: This stage's names, and those of train_checkpoints, train_model and train_resume that callers import from here.
__all__ = [
    "RESUME_INDEPENDENT_KEYS", "RUN_OUTPUTS", "better", "build_policy", "check_data_parallel", "check_out_dir",
    "code_digest", "config_differences", "config_digest", "join_ranks", "make_codec", "make_engine",
    "make_generator", "move_aside", "register", "resume_config", "run", "save_best", "stage_device", "train",
]

console = Console()


def run(params: str, out: str | None = None, resume: bool | Literal["auto"] = False, iterations: int | None = None,
        time_budget_minutes: float | None = None, overrides: Sequence[str] = (), run: str | None = None) -> int:
    cfg = load_config(params, overrides, run)
    overrides_given = list(overrides)
    overrides: dict[str, Any] = {}
    if iterations is not None:
        if iterations < 1:
            raise ConfigError("command line", [f"--iterations: must be >= 1, got {iterations}"])
        overrides["iterations"] = iterations
    if time_budget_minutes is not None:
        if time_budget_minutes < 0:
            raise ConfigError("command line", [f"--time-budget: must be >= 0, got {time_budget_minutes}"])
        overrides["time_budget_minutes"] = time_budget_minutes
    if overrides:
        cfg = cfg.model_copy(update={"train": cfg.train.model_copy(update=overrides)})
    out_dir = Path(out or cfg.train.output_dir)
    with _writer_lock(out_dir, run):  # one command writes --out at a time: a second stops here, exit 2
        return _run(cfg, params, out_dir, resume, iterations, time_budget_minutes, overrides_given, run)


def _writer_lock(out_dir: Path, run: str | None) -> Any:
    """The lock of ``out_dir`` (``stages/out_lock.py``), taken by the process that writes it: this
    one, or rank 0 of ranks launched by hand (the ranks this command launches run under its lock)."""
    if launched_world() > 1 and os.environ.get("RANK", "0") != "0":
        return contextlib.nullcontext()
    from mage_core.stages.out_lock import writer_lock

    return writer_lock(out_dir, f"mage train --out {out_dir}" + (f" --run {run}" if run else ""))


def _run(cfg: Config, params: str, out_dir: Path, resume: bool | Literal["auto"], iterations: int | None,
         time_budget_minutes: float | None, overrides_given: list[str], run: str | None) -> int:
    ranks = cfg.backend.ranks
    if ranks > 1 and launched_world() == 1:
        # The stage launches its own ranks: the same command, as `ranks` processes under torchrun.
        args = ["train", "--params", str(params), "--out", str(out_dir)]
        args += {False: [], True: ["--resume"], "auto": ["--resume", "auto"]}[resume]
        args += ["--iterations", str(iterations)] if iterations is not None else []
        args += ["--time-budget", str(time_budget_minutes)] if time_budget_minutes is not None else []
        args += ["--run", run] if run else []
        for override in overrides_given:
            args += ["--set", override]
        from mage_core.backends import require_built

        require_built(cfg.backend.generator, cfg.backend.engine)  # before any process starts
        check_data_parallel(cfg, ranks)
        stage_device(cfg)  # GPUs asked for and not there: now, not once per rank
        check_out_dir(out_dir)  # an unwritable --out: one line now, not from rank 0 under torchrun
        command = launch_command(ranks, args)
        console.print(f"launching {ranks} ranks: {' '.join(command)}", soft_wrap=True)
        from mage_core.io.workspace_lock import HELD_ENV, output_lock_path

        return subprocess.call(command, env={**os.environ, HELD_ENV: str(output_lock_path(out_dir))})
    summary = train(cfg, out_dir, resume=resume, run_name=run)
    if summary.get("rank", 0) == 0 and not summary.get("kept"):
        console.print(f"final evaluation headline: {summary['headline']:.4f}; trained in {summary['minutes']:.1f} "
                      f"min; outputs in {out_dir}")
    return 0


def check_data_parallel(cfg: Config, world: int) -> None:
    """A run of ``world`` ranks: what must hold before any rank starts (ConfigError
    naming the key and the fix)."""
    if world == 1:
        return
    b, t, algo = cfg.backend, cfg.train, cfg.algorithm
    problems = []
    if b.engine != "deepspeed":
        problems.append(f"backend.ranks {world}: data-parallel training runs on the DeepSpeed engine; set "
                        "backend.engine: deepspeed")
    if cfg.algorithm.agent != "trained":
        problems.append(f"backend.ranks {world}: algorithm.agent {cfg.algorithm.agent} is never trained (and its "
                        "memory bank lives in one process); set backend.ranks: 1")
    batch = t.groups_per_iteration * algo.group_size
    if batch % world:
        problems.append(f"backend.ranks {world} does not divide the batch of train.groups_per_iteration x "
                        f"algorithm.group_size = {t.groups_per_iteration} x {algo.group_size} = {batch} "
                        f"meta-episodes; make it a multiple of {world}")
    elif batch // t.mini_batches_per_epoch < world:
        problems.append(f"train.mini_batches_per_epoch {t.mini_batches_per_epoch}: a mini-batch of {batch} / "
                        f"{t.mini_batches_per_epoch} meta-episodes leaves some of the {world} ranks without one; "
                        f"use at most {batch // world} mini-batches")
    if b.gpus and world != b.gpus:
        problems.append(f"backend.ranks {world} with backend.gpus {b.gpus}: one rank per GPU; make them equal")
    if problems:
        raise ConfigError("params", problems)


@dataclass
class _Training:
    """What one call of ``train`` works with, handed from step to step."""

    cfg: Config
    out_dir: Path
    ranks: Ranks
    checkpoints: CheckpointManager
    digest: str  # config_digest: what a checkpoint must match to be resumed
    code: str  # code_digest: what --resume auto continues
    stored_config: dict[str, Any]  # resume_config: stored in every checkpoint
    tokenizer: Any
    model: Any
    engine: Any
    generator: Any
    trainer: MetaRLTrainer
    state: TrainState
    rng: np.random.Generator
    torch_rng: torch.Generator


def train(cfg: Config, out_dir: Path, resume: bool | Literal["auto"] = False,
          stop_after: int | None = None, run_name: str | None = None) -> dict[str, Any]:
    """Train; returns the summary. ``resume``: False refuses a folder that holds
    checkpoints; True continues the latest (its configuration must match);
    "auto" continues it when the configuration and code match and the run is
    unfinished, keeps a finished run whose ``finished.json`` vouches for it (same
    params, code and input files, its outputs as written: the summary comes back
    with ``kept``, nothing is trained or written), and otherwise moves the old run
    aside (``move_aside``) and starts afresh (a pipeline stage re-run). ``stop_after`` ends the process's work
    after that many iterations of this call (tests use it to interrupt a run).
    ``run_name``: the run of ``reproduce.runs`` (or sweep point) this is, for MLflow."""
    world, device = _check_before_writing(cfg)
    import transformers

    transformers.utils.logging.disable_progress_bar()  # our own progress bar is the one to read
    torch.set_num_threads(cfg.train.num_threads)
    ranks = join_ranks(world)
    checkpoints = CheckpointManager(out_dir / "checkpoints", keep_last=cfg.train.keep_checkpoints)
    digest, code, stored_config = config_digest(cfg), code_digest(), resume_config(cfg)
    latest = checkpoint_to_resume(out_dir, checkpoints, resume, digest, code, cfg, ranks)
    if latest == KEPT:  # a finished run of these params, code and inputs, its outputs as written: nothing to do
        summary = json.loads((out_dir / "summary.json").read_text(encoding="utf-8"))
        return {**summary, "minutes": 0.0, "rank": ranks.rank, "kept": True}
    assert not isinstance(latest, str)
    tokenizer, model = _policy_on_every_rank(cfg, out_dir, ranks, device)
    model_dir = Path(cfg.model.path) if cfg.model.source == "local" else out_dir / "policy-init"
    generator = make_generator(cfg, tokenizer, model_dir, model)
    engine = make_engine(cfg, model)
    trainer = MetaRLTrainer(cfg, engine, generator, make_codec(tokenizer, cfg.policy), ranks)
    try:  # the selection set fits its split (WebShop, ALFWorld), before the first iteration
        trainer.check_suite_sizes([selection_suite(cfg)], cfg.evaluation.meta_episodes_per_opponent_seat)
    except BaseException:
        trainer.close()
        generator.close()
        raise
    training = _Training(cfg, out_dir, ranks, checkpoints, digest, code, stored_config, tokenizer, model, engine,
                         generator, trainer, state=TrainState(),
                         rng=np.random.default_rng(np.random.SeedSequence([cfg.seed, 1])),
                         torch_rng=torch.Generator().manual_seed(cfg.seed))
    if resume and latest is not None:
        _restore(training, latest)
    mlflow_run, logger = _open_logs(training, run_name)
    try:
        started = time.monotonic()
        last_eval = _iterate(training, logger, started, stop_after)
        if last_eval is None:  # stop_after reached: this process's work ends as if it were killed
            return {"interrupted": True, "iteration": training.state.iteration, "headline": float("nan")}
        return _finish(training, logger, mlflow_run, last_eval, started)
    except BaseException as err:
        logger.close("KILLED" if isinstance(err, KeyboardInterrupt) else "FAILED")
        raise
    finally:
        trainer.close()  # the Ray rollout workers, if any
        generator.close()  # vLLM's engine processes, if any


def _check_before_writing(cfg: Config) -> tuple[int, str]:
    """What must hold before anything is written: the backends, the launcher's ranks,
    the device, a generator that can train, what ``train.select_on`` needs, the task's
    data. Returns the number of ranks and the device."""
    from mage_core.backends import require_built

    require_built(cfg.backend.generator, cfg.backend.engine)  # before anything is written
    if cfg.backend.engine == "deepspeed":
        from mage_core.backends.deepspeed_engine import import_deepspeed

        import_deepspeed()  # a broken install fails now, before anything is written
    world = launched_world()
    if world != cfg.backend.ranks:
        raise ConfigError("params", [f"backend.ranks {cfg.backend.ranks}, but the launcher started {world} "
                                     f"process(es) (WORLD_SIZE); set backend.ranks: {world}, or run `mage train` "
                                     "without a launcher (it launches its own ranks)"])
    check_data_parallel(cfg, world)
    device = stage_device(cfg)  # no CUDA for backend.gpus: 1 fails now
    if cfg.backend.generator == "openai" and cfg.algorithm.agent == "trained":
        raise ConfigError("params", ["backend.generator: openai serves a fixed model for evaluation (no "
                                     "log-probabilities for PPO, no weight sync); train with hf or vllm, or use a "
                                     "prompting preset (react, reflexion, a_mem, memento)"])
    if cfg.train.select_on == "exact_greedy":
        exact, spec = games_with("exact_values"), task(cfg.env.name).exact_values
        if spec is None or resolve(spec.greedy_cases)(
                cfg.population.entries(cfg.env.name), cfg.opponents.settings(), 1, "same") is None:
            raise ConfigError("params", [f"train.select_on: exact_greedy needs env.name {' or '.join(exact)} and a "
                                         "population of deterministic opponents (the exact sum runs over the deals "
                                         "only); set train.select_on: sampled"])
    from mage_core.stages.task_data import check_task_data

    check_task_data(cfg, "train")  # WebShop's catalogue: before anything is written
    return world, device


def _policy_on_every_rank(cfg: Config, out_dir: Path, ranks: Ranks, device: str) -> tuple[Any, Any]:
    """The tokenizer and model, on ``device``: rank 0 builds them first, the other ranks
    then read what it wrote."""
    if ranks.main:
        tokenizer, model = build_policy(cfg, out_dir)  # writes policy-init/ on a fresh run
    ranks.barrier()
    if not ranks.main:
        tokenizer, model = build_policy(cfg, out_dir)  # reads rank 0's policy-init/ (or model.path)
    model.to(device)
    if cfg.backend.engine == "deepspeed" and cfg.backend.precision == "bf16":
        # DeepSpeed trains bf16 weights (fp32 master copies in its optimizer): the rollout copy and the
        # reference policy, both taken before the engine casts the model, must hold the same bf16 weights,
        # or PPO's ratio and the KL term start away from 1 and 0.
        model.to(torch.bfloat16)
    return tokenizer, model


def _restore(training: _Training, latest: Path) -> None:
    """Continue from the checkpoint ``latest``: the engine's state, the random generators,
    the best policy's score and iteration, the rollout policy and the league."""
    step, tensors, saved, _ = training.checkpoints.load(latest, expected_metadata={"config_digest": training.digest})
    training.engine.load_state_dict(unpack_engine_state(tensors, saved["engine"]))
    restore_rng(saved["rng"], numpy=training.rng, torch_generator=training.torch_rng)
    training.state = TrainState(iteration=step, best_score=saved["best_score"],
                                best_iteration=saved["best_iteration"])
    training.trainer.load_policy_state(training.engine.policy_state_dict())
    training.trainer.load_league_state(saved.get("league"))
    if training.ranks.main:
        console.print(f"resumed from {latest} at iteration {step}")


def _open_logs(training: _Training, run_name: str | None) -> tuple[Any, StageTracker]:
    """The MLflow run (rank 0, with ``tracking.mlflow``) and the logger over it and
    ``metrics.jsonl`` (rank 0), the params logged where the log is new."""
    cfg, out_dir, digest, main = training.cfg, training.out_dir, training.digest, training.ranks.main
    state = training.state
    continued = state.iteration > 0  # a resumed run appends to its log, cut back to the checkpoint
    mlflow_run, reopened = None, None
    if cfg.tracking.mlflow and main:
        if continued and not os.environ.get(RUN_ID_ENV):  # a flow's stage logs into the flow's run
            # The interrupted run continues: its metrics stay in one MLflow run.
            from mage_core.tracking.mlflow_tracker import default_tracking_uri

            reopened = interrupted_run(default_tracking_uri(Path.cwd()), cfg.tracking.experiment,
                                       str(out_dir.resolve()), digest)
        mlflow_run = open_mlflow_run("train", cfg.tracking.experiment, digest, Path.cwd(),
                                     identity=StageIdentity.of("train", cfg, run_name),
                                     system_metrics=cfg.tracking.system_metrics,
                                     flush_timeout_s=cfg.tracking.flush_timeout_s, continue_run=reopened)
    jsonl = (JsonlLogger(out_dir / "metrics.jsonl", resume_from_step=state.iteration if continued else None)
             if main else None)
    logger = StageTracker([x for x in (jsonl, mlflow_run) if x is not None], mlflow_run)
    params = {"config_digest": digest, **flatten(cfg.model_dump(mode="json"))}
    if jsonl is not None and not continued:
        jsonl.log_params(params)
    elif jsonl is not None:  # a setting that cannot change results may differ: the log says so from here
        jsonl.log_resumed_params(params, state.iteration)
    if mlflow_run is not None:  # tagged with where it resumed (a reopened run has its params already)
        if reopened is None:
            mlflow_run.log_params(params)
        mlflow_run.set_tags({"mage.output_dir": str(out_dir.resolve()), "mage.resumed_from_step": str(state.iteration),
                             "mage.ranks": str(training.ranks.world)})
    return mlflow_run, logger


def _iterate(training: _Training, logger: StageTracker, started: float,
             stop_after: int | None) -> tuple[int, dict[str, float], list[Any]] | None:
    """The iterations under a progress bar, each logged, evaluated every ``train.eval_every``
    (a better policy saved as ``best/``) and checkpointed every ``train.checkpoint_every``,
    until ``train.iterations`` or the time budget. Returns the last evaluation (iteration,
    metrics, meta-episodes), or None once ``stop_after`` iterations were done (the logger
    closed as killed)."""
    cfg, trainer, state, ranks = training.cfg, training.trainer, training.state, training.ranks
    t, main = cfg.train, ranks.main
    # A prompting or memory baseline (algorithm.agent) is never updated: its "training" is the
    # selection-set evaluation of the model as given, saved as best/ like any run's.
    planned = t.iterations if cfg.algorithm.agent == "trained" else 0
    k = trainer.eval_settings.num_episodes
    done_here = 0
    last_eval: tuple[int, dict[str, float], list[Any]] = (-1, {}, [])
    columns = (TextColumn("train {task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("{task.fields[status]}"))
    with Progress(*columns, console=console, transient=False, disable=not main) as progress:
        bar = progress.add_task(cfg.algorithm.preset, total=planned, completed=state.iteration, status="")
        while state.iteration < planned:
            it = state.iteration
            metrics = trainer.iteration(it, training.rng, training.torch_rng)
            state.iteration = it + 1
            metrics.update(trainer.update_league(state.iteration))  # train.league: its next members
            if t.eval_every and (state.iteration % t.eval_every == 0 or state.iteration == planned):
                eval_metrics, eval_metas = trainer.evaluate()
                last_eval = (state.iteration, eval_metrics, eval_metas)
                metrics.update(eval_metrics)
                score = selection_score(eval_metrics, trainer.game, k, t.select_on)
                if better(score, state.best_score, t.select_on):
                    state.best_score, state.best_iteration = score, state.iteration
                    save_best(training.engine, training.model, training.tokenizer, training.out_dir / "best", ranks)
            logger.log_metrics(state.iteration, metrics)
            # Rank 0's clock decides for every rank (they must stop at the same iteration).
            over_budget = ranks.broadcast(bool(t.time_budget_minutes)
                                          and time.monotonic() - started > 60 * t.time_budget_minutes)
            if state.iteration % t.checkpoint_every == 0 or state.iteration == planned or over_budget:
                save_checkpoint(training.checkpoints, training.engine, state, training.rng, training.torch_rng,
                                training.digest, training.code, ranks, trainer.league.state(), training.stored_config)
            progress.update(bar, advance=1, status=_status(metrics, trainer.game, k))
            done_here += 1
            if stop_after is not None and done_here >= stop_after:
                logger.close("KILLED")
                return None
            if over_budget and main:
                console.print(f"time budget of {t.time_budget_minutes} min reached at iteration "
                              f"{state.iteration}")
                break
    return last_eval


def _finish(training: _Training, logger: StageTracker, mlflow_run: Any,
            last_eval: tuple[int, dict[str, float], list[Any]], started: float) -> dict[str, Any]:
    """The final evaluation (``best/`` if the final policy is the best); then rank 0
    writes ``summary.json`` and the transcripts, logs the artifacts and registers
    ``best/``. Returns the summary with the minutes this process trained."""
    cfg, trainer, state, ranks, out_dir = (training.cfg, training.trainer, training.state, training.ranks,
                                           training.out_dir)
    t, main, k = cfg.train, ranks.main, trainer.eval_settings.num_episodes
    # The fixed set is deterministic: an evaluation at this very iteration is the final one.
    final, final_metas = (last_eval[1], last_eval[2]) if last_eval[0] == state.iteration else trainer.evaluate()
    logger.log_metrics(state.iteration, {f"final/{key}": v for key, v in final.items()})
    final_score = selection_score(final, trainer.game, k, t.select_on)
    if better(final_score, state.best_score, t.select_on) or ranks.broadcast(not (out_dir / "best").exists()):
        # the final policy is evaluated on the same set: it may be the best (and with
        # eval_every 0 it is the only one evaluated)
        state.best_score, state.best_iteration = final_score, state.iteration
        save_best(training.engine, training.model, training.tokenizer, out_dir / "best", ranks)
    summary = {  # no wall-clock time: a DVC-cached output
        "method": cfg.algorithm.preset, "game": trainer.game, "iterations": state.iteration,
        "headline": headline(final, trainer.game, k), "best_score": state.best_score,
        "best_iteration": state.best_iteration, "final_eval": without_timings(final), "config_digest": training.digest,
        # The set these figures come from picked best/: report figures come from `mage evaluate`.
        "selection_set": {"seed": cfg.evaluation.selection_seed, "select_on": t.select_on,
                          "meta_episodes_per_opponent_seat": cfg.evaluation.meta_episodes_per_opponent_seat},
    }
    seconds = time.monotonic() - started  # this process's share of the run, when resumed
    if main:
        write_json_atomic(out_dir / "summary.json", summary)
        logger.log_metrics(state.iteration, {"train/time/total_s": seconds})  # MLflow only
        write_text_atomic(out_dir / "transcripts.txt", transcripts(final_metas, trainer.codec.decode))
        for name in ("summary.json", "metrics.jsonl", "transcripts.txt"):
            logger.log_artifact(out_dir / name)
        if mlflow_run is not None and cfg.tracking.register_models and cfg.algorithm.agent == "trained":
            mlflow_run.extra("registering best/", lambda: register(mlflow_run, out_dir / "best", state,
                                                                   t.select_on))
    logger.close()
    if main:  # last: what vouches for the outputs, so that a DVC re-run keeps them (train_resume.py)
        write_finished(out_dir, cfg, training.digest, training.code)
    ranks.barrier()  # no rank leaves before rank 0 has written everything
    return {**summary, "minutes": seconds / 60, "rank": ranks.rank}


def join_ranks(world: int) -> Ranks:
    """This process's place in the run: with ``world`` > 1 (a launcher started the
    ranks) the process group is joined (gloo on CPU, nccl on GPUs) and a GPU rank
    takes the GPU of its ``LOCAL_RANK``."""
    if world == 1:
        return Ranks.single()
    from mage_core.backends.deepspeed_engine import import_deepspeed, init_distributed

    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    check_rendezvous()  # a rank that cannot reach the others stops in minutes, naming the address
    init_distributed(import_deepspeed())
    ranks = Ranks.current()
    if ranks.world != world:
        raise RuntimeError(f"the process group has {ranks.world} ranks, WORLD_SIZE says {world}")
    return ranks


def _status(metrics: dict[str, float], game: str, k: int) -> str:
    unit = task(game).headline
    parts = []
    train_key = f"train/rollout/all/{unit}_ep"
    last = max((int(key.rsplit("ep", 1)[1]) for key in metrics if key.startswith(train_key)), default=None)
    if last is not None:
        parts.append(f"train {unit} ep{last} {metrics[f'{train_key}{last}']:+.3f}")
    if f"eval/all/{unit}_ep{k}" in metrics:
        parts.append(f"eval ep{k} {metrics[f'eval/all/{unit}_ep{k}']:+.3f}")
    return "  ".join(parts)
