"""Rollout workers as Ray actors (``rollout.workers`` > 0; issue 5).

Each actor holds its own ``HFGenerator`` on a copy of the policy, built from
what the trainer has: the model's class and config (pickled once, at start)
and its weights. With ``backend.generator: vllm`` (the pool's ``vllm``
arguments) each actor runs a vLLM engine instead: the model is written from
those weights to a folder on the actor's node and vLLM loads it there, with
``gpus_per_worker`` GPUs of the cluster for the actor (one per engine on GPU
nodes; 0 on a CPU); the stage's own process then holds no vLLM engine. The
weights reach the actors by weight sync: ``ray.put`` of the state dict once,
then every actor loads it into its generator in place (``load_policy_state``);
the pool does this after every update, and once at start for HF actors (a vLLM
actor's engine is built from the driver generator's weights already).

A rollout (``mage_core.rollout.pool.RolloutJob``: specs, settings, sampling,
one seed per meta-episode) is split into contiguous shares, one per actor; each
actor builds its meta-episodes from the specs, plays them with
``run_seeded_meta_episodes`` and returns the finished ``MetaEpisode`` objects
(plain dataclasses, pickled with their env; the tokenizer closures are dropped
on the way and re-attached by the driver). Every meta-episode samples from its
own seeded generator, so the result equals the in-process rollout.

Ray is imported here only (docs/architecture.md: backends/ is the only home of ray), and
only when a pool is built. Without an address the pool starts a local Ray with
``num_workers * cpus_per_worker`` CPUs (and stops it on ``close``); with
``address`` (or ``RAY_ADDRESS``) it joins that cluster, whose nodes must have
this package installed. If Ray is already initialized in this process (a
test, or a stage running as a Ray task) the pool uses it and leaves it running.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

import torch

from mage_core.backends.hf import HFGenerator
from mage_core.backends.ray_local import shutdown_ray, start_local_ray
from mage_core.opponents.registry import OpponentSettings
from mage_core.rollout.meta_episode import MetaEpisode
from mage_core.rollout.pool import RolloutJob, RolloutWorker, attach_codec, contiguous_shares

#: Environment of a Ray started here: no usage reporting, no token auth on a local instance.
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
#: How long the actors may take to start (import torch and transformers, build the model)
#: before the pool gives up: an actor waits forever for CPUs that Ray does not have free.
START_TIMEOUT_S = 300.0


class _RolloutActor:
    """One Ray actor: a ``RolloutWorker`` on its own copy of the policy: an
    ``HFGenerator``, or with ``vllm`` (``VLLMGenerator`` arguments) a vLLM engine
    built from the initial weights ``state``, written first to a folder of the
    actor's own node (so no folder needs to be shared between nodes)."""

    def __init__(self, model_class: type, model_config: Any, dtype: torch.dtype, pad_token_id: int, codec: Any,
                 game: str, opponent_settings: OpponentSettings, num_threads: int,
                 vllm: Mapping[str, Any] | None = None, state: Mapping[str, torch.Tensor] | None = None) -> None:
        torch.set_num_threads(num_threads)  # its share of the CPUs (the actor's num_cpus)
        with torch.random.fork_rng(devices=[]):  # weights are overwritten by the first sync
            model = model_class(model_config).to(dtype)
        self._folder: str | None = None
        if vllm is None:
            generator: Any = HFGenerator(model, pad_token_id)
        else:
            import tempfile

            from mage_core.backends.vllm_generator import VLLMGenerator

            if state is not None:
                model.load_state_dict(state)
            self._folder = tempfile.mkdtemp(prefix="mage-vllm-actor-")
            model.save_pretrained(self._folder, safe_serialization=True)
            del model
            generator = VLLMGenerator(self._folder, **vllm)
        self.worker = RolloutWorker(game, opponent_settings, generator, codec)

    def load_policy_state(self, state: Mapping[str, torch.Tensor]) -> None:
        self.worker.generator.load_policy_state(state)

    def run(self, job: RolloutJob) -> list[MetaEpisode]:
        return self.worker.run(job)

    def close(self) -> None:
        """Shut a vLLM engine's processes down and remove its folder (an HF copy needs nothing)."""
        close = getattr(self.worker.generator, "close", None)
        if close is not None:
            close()
        if self._folder is not None:
            import shutil

            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None

    def num_threads(self) -> int:
        return torch.get_num_threads()


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ImportError("rollout.workers > 0 needs Ray, which is not installed: pip install -e '.[pipeline]' "
                          "(or set rollout.workers: 0)") from None
    return ray


class RayRolloutPool:
    """``num_workers`` Ray actors playing rollout jobs (``rollout.pool.RolloutPool``).

    Use as a context manager, or call ``close()``: it kills the actors and stops
    the Ray instance the pool started (never one it found running)."""

    def __init__(
        self,
        num_workers: int,
        generator: HFGenerator,
        codec: Any,
        game: str,
        opponent_settings: OpponentSettings,
        *,
        address: str | None = None,
        cpus_per_worker: int = 1,
        gpus_per_worker: float = 0,
        vllm: Mapping[str, Any] | None = None,
        start_timeout_s: float = START_TIMEOUT_S,
    ) -> None:
        if not isinstance(num_workers, int) or num_workers < 1:
            raise ValueError(f"num_workers must be an int >= 1, got {num_workers!r}")
        if not isinstance(cpus_per_worker, int) or cpus_per_worker < 1:
            raise ValueError(f"cpus_per_worker must be an int >= 1, got {cpus_per_worker!r}")
        if isinstance(gpus_per_worker, bool) or not isinstance(gpus_per_worker, (int, float)) or gpus_per_worker < 0:
            raise ValueError(f"gpus_per_worker must be a number >= 0, got {gpus_per_worker!r}")
        if not isinstance(generator, HFGenerator):
            raise TypeError(f"Ray rollout workers copy an HFGenerator's model, got {type(generator).__name__}")
        ray = _import_ray()
        self.num_workers = num_workers
        self.codec = codec
        self._ray = ray
        self._actors: list[Any] = []
        self._started_ray = False
        if not ray.is_initialized():
            for key, value in RAY_ENV.items():
                os.environ.setdefault(key, value)
            address = address or os.environ.get("RAY_ADDRESS") or None
            if address:
                ray.init(address=address, logging_level="WARNING")
            else:
                start_local_ray(num_workers * cpus_per_worker, without_ray="set rollout.workers: 0 (no Ray)",
                                logging_level="WARNING")  # on 127.0.0.1 only
            self._started_ray = True
        try:
            model = generator.model
            dtype = next(model.parameters()).dtype
            remote = ray.remote(num_cpus=cpus_per_worker, num_gpus=gpus_per_worker, max_restarts=0)(_RolloutActor)
            config_ref = ray.put(model.config)
            codec_ref = ray.put(codec)
            state_ref = ray.put({k: v.detach().cpu() for k, v in model.state_dict().items()}) if vllm else None
            self._actors = [remote.remote(type(model), config_ref, dtype, generator.pad_token_id, codec_ref, game,
                                          opponent_settings, cpus_per_worker, dict(vllm) if vllm else None,
                                          state_ref) for _ in range(num_workers)]
            self._wait_until_started(start_timeout_s, num_workers * cpus_per_worker, num_workers * gpus_per_worker)
            if vllm is None:  # a vLLM actor's engine starts from these weights already
                self.load_policy_state(model.state_dict())
        except BaseException:
            self.close()
            raise

    def _wait_until_started(self, timeout_s: float, cpus: int, gpus: float = 0) -> None:
        ready, _ = self._ray.wait([actor.num_threads.remote() for actor in self._actors],
                                  num_returns=len(self._actors), timeout=timeout_s)
        if len(ready) < len(self._actors):
            free = self._ray.available_resources()
            total = self._ray.cluster_resources()
            need = f"{cpus} CPUs (train.num_threads each)"
            have = f"{free.get('CPU', 0):g} of {total.get('CPU', 0):g} CPUs"
            if gpus:
                need += f" and {gpus:g} GPUs (one each)"
                have += f" and {free.get('GPU', 0):g} of {total.get('GPU', 0):g} GPUs"
            raise RuntimeError(
                f"rollout.workers: {len(ready)} of {len(self._actors)} Ray rollout workers started within "
                f"{timeout_s:.0f} s; they need {need} and the Ray cluster has {have} free. Use fewer workers, "
                "free the resources, or set rollout.workers: 0")
        self._ray.get(ready)  # an actor that failed to start raises its error here

    def load_policy_state(self, state: Mapping[str, torch.Tensor]) -> None:
        """Weight sync: one ``ray.put`` of the weights, loaded by every actor (waits for all)."""
        ref = self._ray.put({k: v.detach().cpu() for k, v in state.items()})
        self._ray.get([actor.load_policy_state.remote(ref) for actor in self._actors])

    def run(self, job: RolloutJob) -> list[MetaEpisode]:
        """The job's meta-episodes, finished, in order: actor ``i`` plays the ``i``-th contiguous share."""
        shares = contiguous_shares(len(job.specs), self.num_workers)
        refs = [actor.run.remote(job.share(start, stop)) for actor, (start, stop) in zip(self._actors, shares)]
        metas = [meta for part in self._ray.get(refs) for meta in part]
        attach_codec(metas, self.codec)
        return metas

    def worker_threads(self) -> list[int]:
        """Each actor's torch thread count (its CPU share)."""
        return self._ray.get([actor.num_threads.remote() for actor in self._actors])

    def close(self) -> None:
        """Kill the actors; stop Ray if this pool started it. Safe to call twice."""
        actors, self._actors = self._actors, []
        if actors:  # vLLM engines shut their processes down (bounded: a dead actor does not answer)
            self._ray.wait([actor.close.remote() for actor in actors], num_returns=len(actors), timeout=60)
        for actor in actors:
            try:
                self._ray.kill(actor)
            except Exception:  # an actor that already died needs no killing
                pass
        if self._started_ray and self._ray.is_initialized():
            shutdown_ray()  # and the keeper of the local instance it started (ray_local.py)
        self._started_ray = False

    def __enter__(self) -> "RayRolloutPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
