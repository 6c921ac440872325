"""What ``mage train`` keeps of a run as it goes: its checkpoints and its best policy.

- ``save_checkpoint``: the engine's state (every rank's optimizer shard gathered to rank 0),
  the random generators, the best score so far and the league, under ``checkpoints/``
  (``mage_core.trainers.checkpoint``), with what a resume must match;
- ``better``: whether an evaluation's score replaces the best policy;
- ``save_best``: the current policy as ``best/``;
- ``register``: ``best/`` as a version of the MLflow registered model ``mage-<env>-<method>``.

Reading a checkpoint back is the stage's own (``mage_core.stages.train``); which one a run
resumes is ``mage_core.stages.train_resume``'s.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rich.console import Console

from mage_core.trainers.checkpoint import capture_rng, pack_engine_state
from mage_core.trainers.data_parallel import Ranks
from mage_core.trainers.meta_rl import TrainState

console = Console()


def register(mlflow_run: Any, best: Path, state: TrainState, select_on: str) -> None:
    """``best/`` as a new version of the registered model ``mage-<env>-<method>``
    (``mage_core.tracking.registry``), tagged with the run's lineage."""
    from mage_core.tracking.registry import model_uri, register_best

    started = time.perf_counter()
    name, version = register_best(mlflow_run, best, mlflow_run.tags(), {
        "mage.best_iteration": state.best_iteration, "mage.best_score": state.best_score,
        "mage.select_on": select_on})
    mlflow_run.set_tags({"mage.model_uri": model_uri(name, version)})
    console.print(f"best/ registered in MLflow as {model_uri(name, version)} "
                  f"({time.perf_counter() - started:.1f} s)", soft_wrap=True)


def better(score: float, best: float, select_on: str) -> bool:
    """Whether ``score`` replaces the best policy. An exact value ties exactly when two
    policies play the same greedy strategy: the later one, trained longer and so
    closer to its greedy play when sampled, is kept (measured on same-deal Kuhn: the
    greedy value reached the ceiling at iteration 25, when sampled play was far
    below it). A sampled figure must be strictly higher."""
    return score >= best if select_on == "exact_greedy" else score > best


def save_best(engine: Any, model: Any, tokenizer: Any, path: Path, ranks: Ranks) -> None:
    """The current policy as ``best/`` (rank 0 writes it; the engine trains ``model`` in place)."""
    from mage_core.policy.model import save_policy

    # ZeRO-3 keeps slices of the weights: gather them whole (every rank takes part).
    whole = engine.policy_state_dict() if engine.sharded_weights else None
    if ranks.main:
        save_policy(model, tokenizer, path, state_dict=whole)
    ranks.barrier()


def save_checkpoint(checkpoints: Any, engine: Any, state: TrainState, rng: np.random.Generator,
                    torch_rng: torch.Generator, digest: str, code: str, ranks: Ranks, league: list[Any] | None = None,
                    config: dict[str, Any] | None = None) -> None:
    """The checkpoint of ``state.iteration`` (rank 0 writes it; every rank takes part), with the
    metadata a resume must match: ``digest`` (config_digest), ``config`` (resume_config), ``code``
    (code_digest) and the number of ranks."""
    engine_state = engine.state_dict()  # collective with several ranks: rank 0 gets every optimizer shard
    if not ranks.main:
        ranks.barrier()
        return
    tensors, rest = pack_engine_state(engine_state)
    checkpoints.save(state.iteration, tensors, {
        "engine": rest, "rng": capture_rng(numpy=rng, torch_generator=torch_rng),
        "best_score": state.best_score, "best_iteration": state.best_iteration, "league": league or [],
    }, {"config_digest": digest, "config": config, "code_digest": code, "ranks": ranks.world})
    ranks.barrier()
