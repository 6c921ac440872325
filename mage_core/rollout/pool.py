"""Rollouts split over workers, with the same results as one process.

A ``RolloutJob`` is what a rollout needs besides the model: the meta-episodes'
specs, their settings, the env settings, the sampling settings and one seed per
meta-episode (``runner.meta_episode_seeds``). A worker builds its
meta-episodes from the specs (env and opponent seeded by ``spec.task_seed``,
exactly as in-process), plays them with its own copy of the policy, each from
its own seeded generator, and returns the finished ``MetaEpisode`` objects. A
pool gives each worker a contiguous share of the job and concatenates the
results in order; as nothing random is shared between meta-episodes, the
result is the in-process one, whatever the number of workers (up to float
rounding of batched forwards, ~1e-7 in log-probabilities).

This module is backend-neutral: the Ray pool lives in
``mage_core.backends.ray_rollout`` (the only home of ``ray``, docs/architecture.md).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, MutableMapping, Protocol, Sequence

import numpy as np

from mage_core.generation import Generator, SamplingParams
from mage_core.envs.registry import make_env
from mage_core.opponents.registry import OpponentSettings, make_opponent
from mage_core.rollout.meta_episode import MetaEpisode, MetaEpisodeSpec, MetaSettings
from mage_core.rollout.runner import PolicyActor, run_seeded_meta_episodes, seeded_generators


@dataclass(frozen=True)
class RolloutJob:
    """Meta-episodes to play: ``seeds[i]`` seeds the policy draws of ``specs[i]``."""

    specs: tuple[MetaEpisodeSpec, ...]
    settings: MetaSettings
    env_settings: Any  # the game's settings (envs.params.EnvSettings; e.g. a suite's overrides applied)
    sampling: SamplingParams
    seeds: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.specs) != len(self.seeds):
            raise ValueError(f"a RolloutJob needs one seed per spec: {len(self.specs)} specs, {len(self.seeds)} seeds")

    def share(self, start: int, stop: int) -> "RolloutJob":
        return replace(self, specs=self.specs[start:stop], seeds=self.seeds[start:stop])


def contiguous_shares(count: int, num_workers: int) -> list[tuple[int, int]]:
    """``[start, stop)`` of each worker's share: contiguous, in order, sizes
    differing by at most one (the first ``count % num_workers`` one larger);
    empty shares are left out."""
    if num_workers < 1:
        raise ValueError(f"num_workers must be >= 1, got {num_workers}")
    bounds = np.cumsum([0] + [len(a) for a in np.array_split(np.arange(count), num_workers)])
    return [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]


def build_meta_episodes(
    game: str,
    specs: Sequence[MetaEpisodeSpec],
    settings: MetaSettings,
    env_settings: Any,
    opponent_settings: OpponentSettings,
    encode_prompt: Callable[[str], list[int]],
    encode_action: Callable[[str], list[int]],
    opponents: MutableMapping[str, Any] | None = None,
) -> list[MetaEpisode]:
    """Fresh meta-episodes of ``specs``: env and opponent randomness from
    ``spec.task_seed`` only. ``opponents`` caches built opponents by name (they
    hold no per-game state: every draw comes from the env's generator)."""
    opponents = {} if opponents is None else opponents
    metas = []
    for spec in specs:
        opponent = None
        if spec.opponent is not None:
            if spec.opponent not in opponents:
                opponents[spec.opponent] = make_opponent(game, spec.opponent, opponent_settings)
            opponent = opponents[spec.opponent]
        env = make_env(game, env_settings, np.random.default_rng(spec.task_seed), opponent, spec.agent_seat)
        metas.append(MetaEpisode(spec, env, settings, encode_prompt, encode_action))
    return metas


def _detached(text: str) -> list[int]:
    raise RuntimeError("this MetaEpisode came back from a rollout worker without its tokenizer; "
                       "attach_codec() gives it one")


def detach_codec(metas: Sequence[MetaEpisode]) -> None:
    """Drop the tokenizer closures before the finished meta-episodes are
    pickled back to the driver (they would carry the whole tokenizer)."""
    for meta in metas:
        meta.encode = meta.encode_action = _detached


def attach_codec(metas: Sequence[MetaEpisode], codec: Any) -> None:
    """Give returned meta-episodes the driver's ``codec`` (``TokenCodec``) again."""
    for meta in metas:
        meta.encode, meta.encode_action = codec.encode_prompt, codec.encode_action


class RolloutWorker:
    """The body of one rollout worker, in any process: a Generator (its own copy
    of the policy) and the codec; ``run`` plays a job and returns its
    meta-episodes with the codec detached (ready to be pickled)."""

    def __init__(self, game: str, opponent_settings: OpponentSettings, generator: Generator, codec: Any) -> None:
        self.game = game
        self.opponent_settings = opponent_settings
        self.generator = generator
        self.codec = codec
        self._opponents: dict[str, Any] = {}

    def run(self, job: RolloutJob) -> list[MetaEpisode]:
        metas = build_meta_episodes(self.game, job.specs, job.settings, job.env_settings, self.opponent_settings,
                                    self.codec.encode_prompt, self.codec.encode_action, self._opponents)
        actor = PolicyActor(self.generator, self.codec.parse_view(), job.sampling)
        run_seeded_meta_episodes(metas, actor, seeded_generators(job.seeds))
        detach_codec(metas)
        return metas


class RolloutPool(Protocol):
    """Workers that play rollout jobs (``mage_core.backends.ray_rollout.RayRolloutPool``)."""

    num_workers: int

    def run(self, job: RolloutJob) -> list[MetaEpisode]:
        """The job's meta-episodes, finished, in the job's order, codec attached."""
        ...

    def load_policy_state(self, state: Mapping[str, Any]) -> None:
        """Weight sync: every worker samples from these weights from now on."""
        ...

    def close(self) -> None: ...
