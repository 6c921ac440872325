"""``mage sft``: the warm start by imitation (issue 28).

The policy of params.yaml (built as ``mage train`` builds it: the embedded tiny Qwen3
with the task's tokenizer, or a local checkpoint) is trained by behaviour cloning on
its task's expert (``Task.expert``): ``warm_start.meta_episodes`` meta-episodes of the
training distribution, asked exactly as the policy is asked (``rollout.imitation``:
prompt style, memory of earlier attempts, candidates), the expert's choice the target
(cross-entropy over the candidates: the engine's ``imitation`` objective). Then the
warm start plays the selection set, and ``--out`` gets:

- ``model/``: the warm-start policy (``save_policy``: weights, tokenizer, manifest);
- ``demonstrations.jsonl``: every demonstrated decision as the policy saw it (prompt,
  candidates, the action, its attempt and turn, whether it was a detour);
- ``summary.json``: the demonstrations (meta-episodes, decisions, the expert's success
  per attempt, detours), the loss of each epoch, the warm start's selection-set figures
  (``eval/success_ep1`` ... as ``mage train`` reports them) and the expert's own on the same
  tasks (``expert_on_selection``: by attempt, no detour; with the exact ceiling of those tasks
  where the task has one). An expert that reads its memory must win more in its final attempt
  than in its first there, or nothing is cloned (``check_expert_gain``).
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from mage_core.config import Config, ConfigError, load_config
from mage_core.envs.registry import GAMES, resolve, task
from mage_core.io.atomic import write_json_atomic, write_text_atomic


def check(cfg: Config) -> None:
    """What keeps ``cfg`` from a warm start, every problem at once."""
    game, problems = cfg.env.name, []
    if task(game).expert is None:
        having = ", ".join(g for g in GAMES if task(g).expert is not None)
        problems.append(f"env.name {game}: no expert to imitate (tasks with one: {having})")
    if cfg.policy.action_mode != "constrained":
        problems.append("policy.action_mode free: demonstrations are constrained actions (the expert names "
                        "one of the legal actions); set policy.action_mode: constrained")
    if cfg.algorithm.reflect and cfg.policy.reflections == "generated":
        problems.append("policy.reflections generated: an expert writes no reflections; set policy.reflections: "
                        "summary or none")
    if problems:
        raise ConfigError("params", problems)


def demonstrations(trainer: Any, cfg: Config) -> tuple[list[Any], list[dict[str, Any]]]:
    """``warm_start.meta_episodes`` meta-episodes of the training distribution played by
    the expert (task seeds and the expert's draws from ``warm_start.seed``; a seeded task's
    from its training pool), and their
    decisions as text (``play_expert``'s records)."""
    from mage_core.rollout.imitation import play_expert
    from mage_core.rollout.meta_episode import MetaEpisodeSpec

    ws = cfg.warm_start
    rng = np.random.default_rng(ws.seed)
    # A seeded task's demonstrations come from its training pool, apart in content from every
    # report and selection set (envs.task_sets): trainer.draw_task_seed.
    specs = [MetaEpisodeSpec(cfg.env.name, None, 0, trainer.draw_task_seed(rng), i) for i in range(ws.meta_episodes)]
    declared = task(cfg.env.name)
    env_settings = getattr(cfg.env, cfg.env.name).replace(**declared.expert_settings)  # e.g. ALFWorld's planner
    metas = trainer.build(specs, trainer.train_settings, env_settings)
    records = play_expert(metas, resolve(declared.expert), list(rng.spawn(len(metas))), ws.detour)
    return metas, records


def expert_on_selection(trainer: Any, cfg: Config) -> dict[str, Any]:
    """The expert's own play of the selection set the warm start is evaluated on (the same
    tasks, protocol and memory; no detour): its success by attempt, what imitation can hand
    down, and where the task has one (``Task.known_ceiling``) the share of those tasks a player
    who knows the hidden state wins within the turn limit, the exact ceiling of any play."""
    from mage_core.evaluation.suites import selection_suite
    from mage_core.rollout.imitation import play_expert

    declared, e = task(cfg.env.name), cfg.evaluation
    _, env_settings, specs = trainer.suite_specs(selection_suite(cfg), e.meta_episodes_per_opponent_seat,
                                                 e.selection_seed, "select", **declared.expert_settings)
    metas = trainer.build(specs, trainer.eval_settings, env_settings)
    ceiling = None
    if declared.known_ceiling is not None:
        known = resolve(declared.known_ceiling)
        ceiling = sum(bool(known(m.env)) for m in metas) / len(metas)  # the reset tasks, before any play
    rngs = list(np.random.default_rng([cfg.warm_start.seed, 1]).spawn(len(metas)))
    play_expert(metas, resolve(declared.expert), rngs, detour=0.0)
    return {"tasks": len(metas), "success_by_attempt": _attempt_success(metas, trainer.eval_settings.num_episodes),
            "ceiling_known": ceiling}


def check_expert_gain(cfg: Config, trainer: Any, figures: dict[str, Any]) -> None:
    """Stop before cloning when an expert that reads its memory (``Task.expert_memory``) does
    not win more in its final attempt than in its first on a replayed task: its
    demonstrations would not show what an earlier attempt is for."""
    settings = trainer.eval_settings
    if not (task(cfg.env.name).expert_memory and settings.restart == "same" and settings.memory != "none"
            and settings.num_episodes > 1):
        return
    first, final = figures["success_by_attempt"][0], figures["success_by_attempt"][-1]
    if final <= first:
        raise ConfigError("params", [
            f"env.name {cfg.env.name}: its expert reads its memory, yet on the {figures['tasks']} replayed tasks of the "
            f"selection set its final attempt won {final:.3f} against {first:.3f} in its first, so its demonstrations "
            f"do not show an earlier attempt used; nothing was cloned or written (check the task's expert and "
            f"env.{cfg.env.name}'s settings)"])


def expert_success(metas: Sequence[Any], records: Sequence[dict[str, Any]]) -> tuple[int, int]:
    """(won, played) over the attempts the expert played alone: every step its own, no
    detour and no step it could not plan (``play_expert``'s records)."""
    from mage_core.envs.base import Outcome

    strayed = {(r["meta_episode"], r["attempt"]) for r in records if r["detour"]}
    own = {(r["meta_episode"], r["attempt"]) for r in records} - strayed
    won = sum(metas[i].episodes[a].outcome is Outcome.WIN for i, a in own)
    return won, len(own)


def check_expert(cfg: Config, metas: Sequence[Any], records: Sequence[dict[str, Any]]) -> None:
    """Stop before cloning when the demonstrations do not show the task solved."""
    won, played = expert_success(metas, records)
    minimum = cfg.warm_start.min_expert_success
    if played == 0 or won < minimum * played:
        share = f"won {won} of its {played} attempts without a detour" if played else "played no attempt on its own"
        raise ConfigError("params", [
            f"warm_start.min_expert_success {minimum}: the expert of env.name {cfg.env.name} {share}, so its "
            f"demonstrations do not show the task solved; nothing was cloned or written (check the task's "
            f"expert and env.{cfg.env.name}'s settings, or lower warm_start.min_expert_success)"])


def samples_of(metas: Sequence[Any], records: Sequence[dict[str, Any]]) -> list[Any]:
    """The expert's own decisions of ``metas`` as training samples (its choice among the
    candidates). A detour (``records``, one a decision in the same order) is context for
    the decisions after it, never a target: cloned, it would teach the policy to stray."""
    from mage_core.backends.base import Sample

    decisions = [d for m in metas for d in m.decisions]
    if len(decisions) != len(records):
        raise ValueError(f"{len(records)} demonstration records for {len(decisions)} decisions")
    return [Sample(prompt=d.prompt_ids, advantage=1.0, candidates=d.candidate_ids, choice=d.choice)
            for d, r in zip(decisions, records) if not r["detour"]]


def clone(engine: Any, samples: Sequence[Any], cfg: Config) -> list[float]:
    """``warm_start.epochs`` passes over ``samples`` in shuffled mini-batches; each epoch's
    mean imitation loss (minus the mean log-probability of the expert's choices)."""
    import torch

    from mage_core.backends.base import LossSettings

    ws = cfg.warm_start
    loss = LossSettings(entropy_coef=0.0, objective="imitation")
    rng = np.random.default_rng(ws.seed + 1)
    from rich.progress import Progress

    losses = []
    steps = -(-len(samples) // ws.mini_batch_size)
    with Progress(transient=True) as bar:
        job = bar.add_task("imitation", total=ws.epochs * steps)
        for _ in range(ws.epochs):
            order = rng.permutation(len(samples))
            total, weight = 0.0, 0
            for start in range(0, len(order), ws.mini_batch_size):
                batch = [samples[i] for i in order[start: start + ws.mini_batch_size]]
                metrics = engine.step(batch, [torch.zeros(1)] * len(batch), None, loss)
                total, weight = total + metrics["pg_loss"] * len(batch), weight + len(batch)
                bar.advance(job)
            losses.append(total / weight)
    return losses


def _mean_choice_probability(engine: Any, samples: Sequence[Any]) -> float | None:
    """The policy's mean probability of the expert's choice over ``samples`` (None: none)."""
    import torch

    if not samples:
        return None
    return float(torch.cat(engine.logprobs(samples)).exp().mean())


def _attempt_success(metas: Sequence[Any], attempts: int) -> list[float]:
    """Share of meta-episodes won by attempt k (an early-stopped win counts for the later ones)."""
    from mage_core.envs.base import Outcome

    won = [next((k for k, e in enumerate(m.episodes) if e.outcome is Outcome.WIN), attempts) for m in metas]
    return [sum(w <= k for w in won) / len(metas) for k in range(attempts)]


def sft(cfg: Config, out: Path) -> dict[str, Any]:
    """Build the policy, clone the expert, evaluate on the selection set, write ``out``."""
    from mage_core.policy.model import save_policy
    from mage_core.stages.train_model import (build_policy, make_codec, make_engine, make_generator,
                                              warm_start_record)
    from mage_core.evaluation.suites import selection_suite
    from mage_core.trainers.meta_rl import MetaRLTrainer

    check(cfg)
    if cfg.tracking.mlflow:
        from mage_core.tracking.runs import check_tracking

        check_tracking(Path.cwd())  # an unreachable tracking server fails now, before any work
    # The warm start itself starts from the fresh embedded model (or model.path).
    cfg = cfg.model_copy(update={"warm_start": cfg.warm_start.model_copy(update={"tasks": {}}),
                                 "model": cfg.model.model_copy(update={"init": None})})
    import torch

    torch.set_num_threads(cfg.train.num_threads)  # as mage train: stages side by side share the cores
    started = time.perf_counter()
    shutil.rmtree(out / "policy-init", ignore_errors=True)  # a fresh model every time, never an earlier run's
    tokenizer, model = build_policy(cfg, out)
    cloned = cfg.model_copy(update={"train": cfg.train.model_copy(update={"learning_rate": cfg.warm_start.learning_rate,
                                                                           "kl_coef": 0.0})})
    engine = make_engine(cloned, model)
    generator = make_generator(cfg, tokenizer, out / "policy-init", model)
    trainer = MetaRLTrainer(cfg, engine, generator, make_codec(tokenizer, cfg.policy))
    try:
        trainer.check_suite_sizes([selection_suite(cfg)], cfg.evaluation.meta_episodes_per_opponent_seat)
        expert_figures = expert_on_selection(trainer, cfg)
        check_expert_gain(cfg, trainer, expert_figures)
        metas, records = demonstrations(trainer, cfg)
        check_expert(cfg, metas, records)
        held = max(1, len(metas) // 10) if len(metas) > 1 else 0  # the last tenth: never trained on
        cut = len(metas) - held
        samples = samples_of(metas[:cut], [r for r in records if r["meta_episode"] < cut])
        held_out = samples_of(metas[cut:], [r for r in records if r["meta_episode"] >= cut])
        if not samples:
            raise ValueError("the expert's meta-episodes hold no decision to imitate")
        fit_before = _mean_choice_probability(engine, held_out)
        losses = clone(engine, samples, cfg)
        fit = {"train": _mean_choice_probability(engine, samples), "held_out_before": fit_before,
               "held_out": _mean_choice_probability(engine, held_out)}
        trainer.load_policy_state(engine.policy_state_dict())
        figures, _ = trainer.evaluate()
    finally:
        trainer.close()
    write_text_atomic(out / "demonstrations.jsonl", "".join(json.dumps(r) + "\n" for r in records))
    # warm_start.json: what a run from it must match; saved with the policy, in its manifest.
    save_policy(model, tokenizer, out / "model", json_files={"warm_start.json": warm_start_record(cfg)})
    attempts = trainer.train_settings.num_episodes
    summary = {
        "env": cfg.env.name,
        "demonstrations": {"meta_episodes": len(metas), "decisions": len(records),
                           "imitated_decisions": len(samples), "held_out_decisions": len(held_out),
                           "detour": cfg.warm_start.detour,
                           "expert_success_by_attempt": _attempt_success(metas, attempts),
                           "expert_success_alone": dict(zip(("won", "played"), expert_success(metas, records)))},
        "expert_on_selection": expert_figures,
        "loss_by_epoch": losses,
        "expert_choice_probability": fit,
        "selection": {k: v for k, v in figures.items() if isinstance(v, (int, float))},
    }
    # No wall-clock time in summary.json: it is part of the stage's DVC output, whose hash every
    # run that starts from the warm start records; a time there would make each faithful rerun
    # change dvc.lock (issue 40). The time goes to the console and MLflow.
    write_json_atomic(out / "summary.json", summary)
    seconds = round(time.perf_counter() - started, 1)
    if cfg.tracking.mlflow:
        _track(cfg, out, summary, seconds)
    return {**summary, "seconds": seconds}


def _track(cfg: Config, out: Path, summary: dict[str, Any], seconds: float) -> None:
    """The MLflow run (``sft@<task>``): params, the loss of each epoch as steps, the
    demonstrations' and the selection set's figures, the wall-clock seconds, summary.json."""
    from mage_core.io.dotted import flatten
    from mage_core.stages.train_resume import config_digest
    from mage_core.tracking.runs import StageIdentity, open_mlflow_run

    identity = StageIdentity("sft", cfg.env.name, None, cfg.seed, cfg.env.name)
    with open_mlflow_run("sft", cfg.tracking.experiment, config_digest(cfg), Path.cwd(), identity=identity,
                         system_metrics=cfg.tracking.system_metrics) as run:
        run.log_params(flatten(cfg.model_dump(mode="json")))
        for epoch, value in enumerate(summary["loss_by_epoch"], start=1):
            run.log_metrics(epoch, {"sft/loss": value})
        demos = summary["demonstrations"]
        fit = {f"sft/p_expert/{k}": v for k, v in summary["expert_choice_probability"].items() if v is not None}
        run.log_metrics(len(summary["loss_by_epoch"]), {
            **summary["selection"], **fit, "sft/decisions": float(demos["decisions"]), "sft/time/total_s": seconds,
            **{f"sft/expert_success_ep{k + 1}": v for k, v in enumerate(demos["expert_success_by_attempt"])},
            **{f"sft/expert_selection_success_ep{k + 1}": v
               for k, v in enumerate(summary["expert_on_selection"]["success_by_attempt"])},
            **({"sft/ceiling_known": summary["expert_on_selection"]["ceiling_known"]}
               if summary["expert_on_selection"]["ceiling_known"] is not None else {})})
        run.log_artifact(out / "summary.json")


def _rounded(values: dict[str, float | None]) -> dict[str, float | None]:
    return {k: (round(v, 3) if v is not None else None) for k, v in values.items()}


def run(params: str, overrides: Sequence[str], out: str, run_name: str | None = None,
        task_name: str | None = None) -> int:
    from rich.console import Console

    cfg = load_config(params, overrides, run_name, warm_start=task_name)
    from mage_core.stages.out_lock import writer_lock

    with writer_lock(Path(out), f"mage sft --out {out}" + (f" --task {task_name}" if task_name else "")):
        summary = sft(cfg, Path(out))
    demos, selection, expert = summary["demonstrations"], summary["selection"], summary["expert_on_selection"]
    ceiling = f", the hidden state known {expert['ceiling_known']:.3f}" if expert["ceiling_known"] is not None else ""
    Console(soft_wrap=True).print(
        f"warm start of {cfg.env.name}: {demos['decisions']} decisions of {demos['meta_episodes']} expert "
        f"meta-episodes (expert success by attempt {[round(x, 3) for x in demos['expert_success_by_attempt']]}); "
        f"loss by epoch {[round(x, 4) for x in summary['loss_by_epoch']]}; p(expert's choice) "
        f"{_rounded(summary['expert_choice_probability'])}; selection set ({expert['tasks']} tasks): the expert by "
        f"attempt {[round(x, 3) for x in expert['success_by_attempt']]}{ceiling}; the warm start "
        + ", ".join(f"{k.removeprefix('eval/')} {v:.3f}" for k, v in selection.items() if "success_ep" in k)
        + f"; {summary['seconds']} s -> {out}")
    return 0
