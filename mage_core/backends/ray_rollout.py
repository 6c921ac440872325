"""Rollout workers as Ray actors (``rollout.workers`` > 0; issue 5).

Each actor holds its own ``HFGenerator`` on a copy of the policy, built from
what the trainer has: the model's class and config (pickled once, at start)
and its weights. The weights reach the actors by weight sync: ``ray.put`` of
the state dict once, then every actor copies it into its model
(``HFGenerator.load_policy_state``, in place); the pool does this once at start
with the driver generator's weights and again after every update.

A rollout (``mage_core.rollout.pool.RolloutJob``: specs, settings, sampling,
one seed per meta-episode) is split into contiguous shares, one per actor; each
actor builds its meta-episodes from the specs, plays them with
``run_seeded_meta_episodes`` and returns the finished ``MetaEpisode`` objects
(plain dataclasses, pickled with their env; the tokenizer closures are dropped
on the way and re-attached by the driver). Every meta-episode samples from its
own seeded generator, so the result equals the in-process rollout.

Ray is imported here only (DESIGN.md: backends/ is the only home of ray), and
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
from mage_core.opponents.registry import OpponentSettings
from mage_core.rollout.meta_episode import MetaEpisode
from mage_core.rollout.pool import RolloutJob, RolloutWorker, attach_codec, contiguous_shares

#: Environment of a Ray started here: no usage reporting, no token auth on a local instance.
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
#: How long the actors may take to start (import torch and transformers, build the model)
#: before the pool gives up: an actor waits forever for CPUs that Ray does not have free.
START_TIMEOUT_S = 300.0


class _RolloutActor:
    """One Ray actor: a ``RolloutWorker`` on its own copy of the policy."""

    def __init__(self, model_class: type, model_config: Any, dtype: torch.dtype, pad_token_id: int, codec: Any,
                 game: str, opponent_settings: OpponentSettings, num_threads: int) -> None:
        torch.set_num_threads(num_threads)  # its share of the CPUs (the actor's num_cpus)
        with torch.random.fork_rng(devices=[]):  # weights are overwritten by the first sync
            model = model_class(model_config).to(dtype)
        self.worker = RolloutWorker(game, opponent_settings, HFGenerator(model, pad_token_id), codec)

    def load_policy_state(self, state: Mapping[str, torch.Tensor]) -> None:
        self.worker.generator.load_policy_state(state)

    def run(self, job: RolloutJob) -> list[MetaEpisode]:
        return self.worker.run(job)

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
        start_timeout_s: float = START_TIMEOUT_S,
    ) -> None:
        if not isinstance(num_workers, int) or num_workers < 1:
            raise ValueError(f"num_workers must be an int >= 1, got {num_workers!r}")
        if not isinstance(cpus_per_worker, int) or cpus_per_worker < 1:
            raise ValueError(f"cpus_per_worker must be an int >= 1, got {cpus_per_worker!r}")
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
                ray.init(num_cpus=num_workers * cpus_per_worker, include_dashboard=False, logging_level="WARNING")
            self._started_ray = True
        try:
            model = generator.model
            dtype = next(model.parameters()).dtype
            remote = ray.remote(num_cpus=cpus_per_worker, max_restarts=0)(_RolloutActor)
            config_ref = ray.put(model.config)
            codec_ref = ray.put(codec)
            self._actors = [remote.remote(type(model), config_ref, dtype, generator.pad_token_id, codec_ref, game,
                                          opponent_settings, cpus_per_worker) for _ in range(num_workers)]
            self._wait_until_started(start_timeout_s, num_workers * cpus_per_worker)
            self.load_policy_state(model.state_dict())
        except BaseException:
            self.close()
            raise

    def _wait_until_started(self, timeout_s: float, cpus: int) -> None:
        ready, _ = self._ray.wait([actor.num_threads.remote() for actor in self._actors],
                                  num_returns=len(self._actors), timeout=timeout_s)
        if len(ready) < len(self._actors):
            free = self._ray.available_resources().get("CPU", 0)
            total = self._ray.cluster_resources().get("CPU", 0)
            raise RuntimeError(
                f"rollout.workers: {len(ready)} of {len(self._actors)} Ray rollout workers started within "
                f"{timeout_s:.0f} s; they need {cpus} CPUs (train.num_threads each) and the Ray cluster has "
                f"{free:g} of {total:g} free. Use fewer workers, free the CPUs, or set rollout.workers: 0")
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
        for actor in actors:
            try:
                self._ray.kill(actor)
            except Exception:  # an actor that already died needs no killing
                pass
        if self._started_ray and self._ray.is_initialized():
            self._ray.shutdown()
        self._started_ray = False

    def __enter__(self) -> "RayRolloutPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
