"""The meta-RL training loop, written against the backend protocols.

One iteration: draw groups of meta-episodes from the population (one
opponent, seat and task seed per group: agent-specific normalization, docs/method.md
section 5), roll them out in batches, turn them into samples with MAGE's
returns and advantages, run PPO epochs over mini-batches, and sync the new
weights into the generator. Evaluation runs on a fixed set; checkpoints carry
everything a resumed run needs to continue exactly as an uninterrupted one.

Rollouts (training and evaluation) run in this process, or with
``rollout.workers`` > 0 on a pool of Ray actors (built on first use, synced
after every update, closed by ``close()``); both give the same meta-episodes,
as every meta-episode samples from its own generator seeded from
(``torch_rng`` or the suite's seed, its index): ``runner.meta_episode_seeds``.

Data parallel (``ranks``, ``mage_core.trainers.data_parallel``): every rank
draws the same specs and seeds, plays its share of them (in process or on its
own rollout workers), and gathers the whole batch; each PPO mini-batch is
split over the ranks, whose engine averages the gradients.
"""

from __future__ import annotations

import functools
import gc
import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Sequence, TypeVar

import numpy as np
import torch

from mage_core.backends.base import LossSettings, TrainEngine
from mage_core.generation import Generator, SamplingParams
from mage_core.config import Config
from mage_core.evaluation.meta_eval import evaluation_specs, summarize
from mage_core.envs.registry import is_single_agent, task
from mage_core.envs.task_sets import Pool, draw_seed, pooled
from mage_core.evaluation.suites import Suite, selection_suite, suite_seed
from mage_core.opponents.population import Population
from mage_core.opponents.registry import OpponentSettings
from mage_core.rollout.meta_episode import MetaEpisode, MetaEpisodeSpec, MetaSettings
from mage_core.rollout.protocol import AGENT_MEMORY, evaluation_settings, meta_settings  # noqa: F401  (re-exported)
from mage_core.rollout.pool import RolloutJob, RolloutPool, attach_codec, build_meta_episodes, detach_codec
from mage_core.rollout.retrieval import MemoryBank
from mage_core.rollout.runner import (
    PolicyActor,
    meta_episode_seeds,
    run_seeded_meta_episodes,
    seeded_generators,
)
from mage_core.trainers.batch import AdvantageSettings, build_samples
from mage_core.trainers import probes
from mage_core.trainers.data_parallel import Ranks
from mage_core.trainers.league import League


_F = TypeVar("_F", bound=Callable[..., Any])


def gc_paused(fn: _F) -> _F:
    """Run ``fn`` with Python's cyclic garbage collector off (restored after, also on an
    error). A rollout allocates hundreds of thousands of short-lived objects, and each
    generation-2 collection they trigger walks every object of the process (torch,
    transformers: ~400k), ~0.2 s a time on Kuhn Poker's 512 meta-episodes, about
    10% of an iteration. An iteration or evaluation makes no reference cycles
    (``gc.collect()`` after one finds none), so reference counting alone frees all
    it drops; anything cyclic would wait for the next collection outside it. Results
    do not change: the collector never touches live objects."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not gc.isenabled():  # nested, or the caller turned it off
            return fn(*args, **kwargs)
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            gc.enable()

    return wrapper  # type: ignore[return-value]


@dataclass
class TokenCodec:
    """Text <-> token ids for prompts and actions. ``decode``: a response's whole
    text (transcripts); ``answer``: the part the game parses (after the thinking,
    for a thinking model; default ``decode``); ``stop_token_ids``: where a
    free-text response ends (the end-of-turn tokens)."""

    encode_prompt: Callable[[str], list[int]]
    encode_action: Callable[[str], list[int]]
    decode: Callable[[list[int]], str]
    answer: Optional[Callable[[list[int]], str]] = None
    stop_token_ids: tuple[int, ...] = ()

    def parse_view(self) -> Callable[[list[int]], str]:
        return self.answer if self.answer is not None else self.decode


@dataclass
class TrainState:
    """What a checkpoint must restore besides the engine."""

    iteration: int = 0
    best_score: float = -math.inf
    best_iteration: int = -1


def reward_unit(cfg: Config, game: str) -> tuple[float, str]:
    """Task reward per score unit, and that unit: Kuhn metrics read in chips per hand
    (docs/method.md section 8), the others in reward."""
    spec = task(game)
    return spec.reward_scale(getattr(cfg.env, game)), spec.score_unit


#: PPO step metrics that are token means over a rank's samples (combined over ranks by token count).
TOKEN_MEAN_METRICS = ("loss", "pg_loss", "entropy", "clip_frac", "approx_kl", "kl")


class MetaRLTrainer:
    def __init__(self, cfg: Config, engine: TrainEngine | None, generator: Generator, codec: TokenCodec,
                 ranks: Ranks | None = None) -> None:
        """``engine`` may be None for evaluation only. ``ranks``: this process's
        place in a data-parallel run (default: one process)."""
        self.cfg = cfg
        self.ranks = ranks or Ranks.single()
        self.game = cfg.env.name
        self.engine = engine
        self.generator = generator
        self.codec = codec
        algo = cfg.algorithm
        self.advantage_settings = AdvantageSettings(
            reward_variant=algo.reward_variant, advantage=algo.advantage, episode_norm=algo.episode_norm,
            step_weight=algo.step_weight, anchor=algo.anchor, grouping=algo.grouping, group_scope=algo.group_scope,
            gamma_step=algo.gamma_step, gamma_traj=algo.gamma_traj, episode_score=algo.episode_score,
            episode_baseline=algo.episode_baseline)
        self.train_settings = meta_settings(cfg, self.game, algo.episodes_per_meta_episode, algo.reflect)
        self.eval_settings = evaluation_settings(cfg)
        self.population = (Population(cfg.population.entries(self.game))  # type: ignore[arg-type]
                           if not is_single_agent(self.game) else None)
        self.league = League(cfg, self.game)  # train.league
        self._opponents: dict[str, Any] = {}
        self._env_settings = getattr(cfg.env, self.game)  # envs.params.EnvSettings
        self._pool: RolloutPool | None = None  # Ray rollout workers, built on first use (rollout.workers > 0)

    # -- rollout workers ---------------------------------------------------------------------------

    def pool(self) -> RolloutPool | None:
        """The rollout workers (None with ``rollout.workers: 0``), started on first call."""
        if self.cfg.rollout.workers == 0:
            return None
        if self._pool is None:
            from mage_core.backends.ray_rollout import RayRolloutPool

            vllm = self.cfg.backend.generator == "vllm"  # vLLM engines on the actors (one GPU each on GPU nodes)
            self._pool = RayRolloutPool(
                self.cfg.rollout.workers, self.generator, self.codec, self.game,  # type: ignore[arg-type]
                self.cfg.opponents.settings(), address=self.cfg.rollout.ray_address,
                cpus_per_worker=self.cfg.train.num_threads,
                gpus_per_worker=1 if vllm and self.cfg.backend.gpus else 0,
                vllm=self.cfg.vllm_engine() if vllm else None)
        return self._pool

    def load_policy_state(self, state: Mapping[str, torch.Tensor]) -> None:
        """Weight sync into the generator and, when running, the rollout workers."""
        self.generator.load_policy_state(state)
        if self._pool is not None:
            self._pool.load_policy_state(state)

    def close(self) -> None:
        """Stop the rollout workers, if running (the next rollout would start them again)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def __enter__(self) -> "MetaRLTrainer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the league (train.league, trainers/league.py) ---------------------------------------------

    def opponent_settings(self) -> OpponentSettings:
        """The configured opponents and the league's members."""
        return self.league.opponent_settings()

    def update_league(self, iteration: int) -> dict[str, float]:
        """After ``iteration`` iterations, when the league is due: grow it from the policy's
        first hand (``probes.policy_strategy``) and rebuild the training population
        (``League.grow``'s metrics; empty when not due)."""
        if not self.league.due(iteration):
            return {}
        metrics = self.league.grow(iteration, probes.policy_strategy(self))
        self.population = self.league.population()
        return metrics

    def load_league_state(self, state: Sequence[Sequence[Any]] | None) -> None:
        """Restore a checkpoint's league (``League.state``) and the population it implies."""
        self.league.load(state)
        if self.population is not None:
            self.population = self.league.population()

    # -- building meta-episodes -----------------------------------------------------------------

    def sample_specs(self, rng: np.random.Generator) -> list[MetaEpisodeSpec]:
        """``groups_per_iteration`` groups of ``group_size`` meta-episodes. Stationary
        grouping: a group shares task seed, opponent and seat. Non-stationary (the
        ablation): members share the task seed but draw their own opponent/seat.
        Batch scope (``algorithm.group_scope``): every meta-episode draws its own task
        seed and (opponent, seat); the groups are formed over the whole batch."""
        t, algo = self.cfg.train, self.cfg.algorithm
        specs = []
        if algo.group_scope == "batch":
            count = t.groups_per_iteration * algo.group_size
            draws = self.population.sample(rng, count) if self.population is not None else [None] * count
            for i, d in enumerate(draws):
                opponent, seat = (d.opponent, d.agent_seat) if d is not None else (None, 0)
                specs.append(MetaEpisodeSpec(self.game, opponent, seat, self.draw_task_seed(rng), i))
            return specs
        for g in range(t.groups_per_iteration):
            task_seed = self.draw_task_seed(rng)
            if self.population is None:
                draws = [(None, 0)] * algo.group_size
            elif algo.grouping == "stationary":
                d = self.population.sample(rng, 1)[0]
                draws = [(d.opponent, d.agent_seat)] * algo.group_size
            else:
                draws = [(d.opponent, d.agent_seat) for d in self.population.sample(rng, algo.group_size)]
            specs += [MetaEpisodeSpec(self.game, o, s, task_seed, g) for o, s in draws]
        return specs

    def draw_task_seed(self, rng: np.random.Generator) -> int:
        """A training task's seed: any seed, or for a seeded task (Sokoban's levels,
        MineSweeper's boards) one whose task lies in the training pool, never a task of the
        report or selection sets (``envs.task_sets``)."""
        if pooled(self.game):
            return draw_seed(self.game, self._env_settings, rng, "train")
        return int(rng.integers(2**62))

    def build(self, specs: Sequence[MetaEpisodeSpec], settings: MetaSettings,
              env_settings: Any = None) -> list[MetaEpisode]:
        env_settings = env_settings if env_settings is not None else self._env_settings
        metas = build_meta_episodes(self.game, specs, settings, env_settings, self.opponent_settings(),
                                    self.codec.encode_prompt, self.codec.encode_action, self._opponents)
        if settings.retrieval != "none":  # a memory baseline: one bank shared by the call's meta-episodes
            bank = MemoryBank(settings.retrieval, self.cfg.algorithm.retrieve_k)
            for meta in metas:
                meta.bank = bank
        return metas

    def rollout(self, specs: Sequence[MetaEpisodeSpec], settings: MetaSettings, sampling: SamplingParams,
                rng: torch.Generator, env_settings: Any = None) -> list[MetaEpisode]:
        """Play ``specs`` to the end, in-process or on the rollout workers, in one
        process or split over the data-parallel ranks (same result): meta-episode
        ``i`` samples from a generator seeded with ``meta_episode_seeds(rng, len(specs))[i]``."""
        pool = self.pool()
        if settings.retrieval != "none" and (pool is not None or self.ranks.distributed):
            raise ValueError(f"algorithm.agent {self.cfg.algorithm.agent}: its memory bank lives in the rollout's "
                             "process; set rollout.workers: 0 and backend.ranks: 1")
        seeds = meta_episode_seeds(rng, len(specs))
        start, stop = self.ranks.share(len(specs))
        env_settings = env_settings if env_settings is not None else self._env_settings
        if pool is None:
            metas = self.build(specs[start:stop], settings, env_settings)
            return self.play(metas, self.actor(sampling), seeds[start:stop], shared=False)
        mine = pool.run(RolloutJob(tuple(specs[start:stop]), settings, env_settings, sampling,
                                   tuple(seeds[start:stop])))
        return self._gather(mine)

    def play(self, metas: Sequence[MetaEpisode], actor: PolicyActor, seeds: Sequence[int],
             shared: bool = True) -> list[MetaEpisode]:
        """Play ``metas`` in this process, ``metas[i]`` from a generator seeded with
        ``seeds[i]``, and return the whole call's meta-episodes. ``shared``: every
        rank holds all of the call's ``metas`` and plays its share; else ``metas``
        is this rank's share already. With one rank, ``metas`` itself."""
        if shared:
            start, stop = self.ranks.share(len(metas))
            metas, seeds = metas[start:stop], seeds[start:stop]
        run_seeded_meta_episodes(metas, actor, seeded_generators(seeds))
        return self._gather(metas)

    def _gather(self, mine: Sequence[MetaEpisode]) -> list[MetaEpisode]:
        """Every rank's finished share, in the call's order, on every rank."""
        if not self.ranks.distributed:
            return list(mine)
        detach_codec(mine)  # the tokenizer closures stay home
        metas = self.ranks.gather(mine)
        attach_codec(metas, self.codec)
        return metas

    def _logprobs(self, samples: Sequence[Any], bounds: np.ndarray, policy: str) -> list[torch.Tensor]:
        """``engine.logprobs`` of every sample; with several ranks each scores its
        contiguous share of the meta-episodes and the shares are gathered."""
        assert self.engine is not None
        if not self.ranks.distributed:
            return self.engine.logprobs(samples, policy=policy)
        start, stop = self.ranks.share(len(bounds) - 1)
        lo, hi = int(bounds[start]), int(bounds[stop])
        mine = self.engine.logprobs(samples[lo:hi], policy=policy) if hi > lo else []
        return self.ranks.gather(mine)

    def actor(self, sampling: SamplingParams) -> PolicyActor:
        return PolicyActor(self.generator, self.codec.parse_view(), sampling)

    def train_sampling(self) -> SamplingParams:
        return SamplingParams(temperature=self.cfg.rollout.temperature,
                              max_new_tokens=self.cfg.policy.max_new_tokens,
                              stop_token_ids=self.codec.stop_token_ids)

    # -- one iteration ----------------------------------------------------------------------------

    @gc_paused
    def iteration(self, it: int, rng: np.random.Generator, torch_rng: torch.Generator) -> dict[str, float]:
        t = self.cfg.train
        if self.engine is None:
            raise RuntimeError("this trainer was built for evaluation only (no TrainEngine)")
        started = time.perf_counter()
        fraction = it / max(t.iterations - 1, 1)
        lr = t.learning_rate * (1 - 0.9 * fraction) if t.lr_schedule == "linear_decay" else t.learning_rate
        entropy_coef = t.entropy_coef + (t.entropy_coef_final - t.entropy_coef) * fraction
        self.engine.set_learning_rate(lr)

        metas = self.rollout(self.sample_specs(rng), self.train_settings, self.train_sampling(), torch_rng)
        rollout_s = time.perf_counter() - started
        sleeping = self.cfg.backend.vllm_sleep  # (GPU only) the colocated engine's memory goes to the update
        if sleeping:
            self.generator.sleep(level=2)  # type: ignore[attr-defined]  # weights dropped: the sync refills them

        samples = build_samples(metas, self.advantage_settings)
        samples_s = time.perf_counter() - started - rollout_s
        # Mini-batches of whole meta-episodes: their prompts are prefix chains that
        # the engine packs into one row each (TorchEngine pack_prefixes).
        bounds = np.cumsum([0] + [len(m.decisions) for m in metas])
        assert bounds[-1] == len(samples)
        if t.old_logprobs == "rollout":  # the weights that sampled them are the engine's own
            old = [torch.tensor(d.old_logprobs(), dtype=torch.float32) for m in metas for d in m.decisions]
            assert len(old) == len(samples)  # build_samples keeps the meta-episodes' decision order
        else:
            old = self._logprobs(samples, bounds, "current")
        ref = self._logprobs(samples, bounds, "reference") if t.kl_coef > 0 else None
        logprobs_s = time.perf_counter() - started - rollout_s - samples_s
        loss = LossSettings(clip_ratio=t.clip_ratio, entropy_coef=entropy_coef, kl_coef=t.kl_coef,
                            kl_estimator=t.kl_estimator)
        step_metrics = self._ppo_epochs(it, rng, samples, bounds, old, ref, loss)
        update_s = time.perf_counter() - started - rollout_s - samples_s - logprobs_s
        if sleeping:
            torch.cuda.empty_cache()  # the update's cached blocks, for vLLM to take back
            self.generator.wake_up(["weights"])  # type: ignore[attr-defined]
        self.load_policy_state(self.engine.policy_state_dict())
        if sleeping:
            self.generator.wake_up(["kv_cache"])  # type: ignore[attr-defined]

        unit_scale, unit = reward_unit(self.cfg, self.game)
        summary = summarize(metas, self.train_settings.num_episodes, unit_scale, unit)
        metrics = {f"train/rollout/{k}": v for k, v in summary.items() if k.startswith("all/")}
        for key in step_metrics[0] if step_metrics else []:
            metrics[f"train/ppo/{key}"] = float(np.mean([m[key] for m in step_metrics]))
        metrics.update({
            "train/opt/learning_rate": lr,
            "train/opt/entropy_coef": entropy_coef,
            "train/batch/num_samples": float(len(samples)),
            "train/batch/num_meta_episodes": float(len(metas)),
        })
        # Timings (train/time/*): MLflow and the console only, never a cached output.
        iteration_s = time.perf_counter() - started
        prompt_tokens = sum(len(s.prompt) for s in samples)
        metrics.update({
            "train/time/rollout_s": rollout_s,
            "train/time/samples_s": samples_s,
            "train/time/logprobs_s": logprobs_s,
            "train/time/update_s": update_s,
            "train/time/iteration_s": iteration_s,
            "train/time/meta_episodes_per_s": len(metas) / iteration_s,
            "train/time/prompt_tokens_per_s": prompt_tokens / iteration_s,
        })
        return metrics

    def _ppo_epochs(self, it: int, rng: np.random.Generator, samples: Sequence[Any], bounds: np.ndarray,
                    old: Sequence[torch.Tensor], ref: Sequence[torch.Tensor] | None,
                    loss: LossSettings) -> list[dict[str, float]]:
        """``train.ppo_epochs`` passes of PPO steps, each over mini-batches of whole
        meta-episodes (``bounds``: their sample ranges) in an order drawn from ``rng``;
        the metrics of every step (token-means over the ranks)."""
        assert self.engine is not None
        t = self.cfg.train
        step_metrics: list[dict[str, float]] = []
        for _ in range(t.ppo_epochs):
            meta_order = rng.permutation(len(bounds) - 1)
            for chunk in np.array_split(meta_order, t.mini_batches_per_epoch):
                start, stop = self.ranks.share(len(chunk))  # this rank's part of the mini-batch
                idx = [i for k in chunk[start:stop] for i in range(int(bounds[k]), int(bounds[k + 1]))]
                if self.ranks.distributed:
                    least, most = self.ranks.min_max(len(idx))
                    if least == 0 < most:  # a step is collective: a rank with nothing cannot skip it alone
                        raise RuntimeError(
                            f"iteration {it}: a PPO mini-batch left a rank without a decision to train on "
                            f"({len(chunk)} meta-episodes over {self.ranks.world} ranks); raise "
                            "train.groups_per_iteration or lower train.mini_batches_per_epoch")
                if not idx:
                    continue
                metrics_step = self.engine.step(
                    [samples[i] for i in idx], [old[i] for i in idx],
                    [ref[i] for i in idx] if ref is not None else None, loss)
                keys = [key for key in TOKEN_MEAN_METRICS if key in metrics_step]
                step_metrics.append(self.ranks.token_mean(metrics_step, metrics_step["num_tokens"], keys))
        return step_metrics

    # -- evaluation -------------------------------------------------------------------------------

    @gc_paused
    def evaluate(self, per_opponent_seat: int | None = None,
                 seed: int | None = None) -> tuple[dict[str, float], list[MetaEpisode]]:
        """The fixed selection set of the training population (in-domain; base
        seed ``evaluation.selection_seed``, or ``seed``; WebShop: its ``select``
        split, ``evaluation.suites.selection_suite``), and for Kuhn Poker against
        deterministic opponents the greedy policy's exact value
        (``probes.exact_greedy_values``: ``chips_exact_ep{k}`` next to the sampled
        ``chips_ep{k}``) and the exact exploitability of the policy's first hand
        (``probes.strategy_metrics``)."""
        suite = selection_suite(self.cfg)
        metas = self.run_suite(suite, per_opponent_seat or self.cfg.evaluation.meta_episodes_per_opponent_seat,
                               self.cfg.evaluation.selection_seed if seed is None else seed, pool="select")
        unit_scale, unit = reward_unit(self.cfg, self.game)
        summary = summarize(metas, self.eval_settings.num_episodes, unit_scale, unit, suite.weights())
        return ({**{f"eval/{k}": v for k, v in summary.items()}, **probes.exact_greedy_values(self),
                 **probes.strategy_metrics(self)}, metas)

    def check_suite_sizes(self, suites: Sequence[Suite], per_opponent_seat: int) -> None:
        """Before any work: an evaluation set of a finite split (WebShop's goals, ALFWorld's
        games: ``envs.base.FiniteSplit``) plays each task once, so it may not ask for more
        tasks than the split holds (found otherwise only when the set is played, after the
        work before it). One env is built per suite to read its split's size."""
        from mage_core.config import ConfigError
        from mage_core.envs.base import FiniteSplit
        from mage_core.envs.registry import make_env

        if not is_single_agent(self.game):
            return
        problems = []
        for suite in suites:
            env = make_env(self.game, self._env_settings.replace(**suite.env_overrides),
                           np.random.default_rng(0))
            if isinstance(env, FiniteSplit) and env.split_size() < per_opponent_seat:
                problems.append(
                    f"evaluation.meta_episodes_per_opponent_seat {per_opponent_seat}: the {suite.name} set plays each "
                    f"of its split's {env.split_size()} {self.game} tasks once; lower it (reproduce.eval_per_pair in "
                    f"`mage reproduce`) to at most {env.split_size()}, or make the split larger")
        if problems:
            raise ConfigError("params", problems)

    def suite_specs(self, suite: Suite, per_opponent_seat: int, base_seed: int | None = None,
                    pool: Pool = "report", **settings: Any) -> tuple[int, Any, list[MetaEpisodeSpec]]:
        """A suite's seed, environment settings (the suite's overrides, then ``settings``)
        and fixed meta-episode specs, as ``run_suite`` plays them (``mage sft``'s expert
        plays the same ones)."""
        seed = suite_seed(self.cfg.evaluation.seed if base_seed is None else base_seed, suite.name)
        env_settings = self._env_settings.replace(**suite.env_overrides, **settings)
        return seed, env_settings, evaluation_specs(self.game, list(suite.entries), per_opponent_seat, seed,
                                                    env_settings, pool)

    @gc_paused
    def run_suite(self, suite: Suite, per_opponent_seat: int, base_seed: int | None = None,
                  pool: Pool = "report") -> list[MetaEpisode]:
        """Play a suite's fixed meta-episodes (``per_opponent_seat`` per (opponent,
        seat); Sokoban: that many levels) with the evaluation sampling settings.
        ``base_seed``: the set's seed (default ``evaluation.seed``, the report suites);
        ``pool``: the content pool of a seeded task's set (``envs.task_sets``)."""
        e = self.cfg.evaluation
        seed, env_settings, specs = self.suite_specs(suite, per_opponent_seat, base_seed, pool)
        sampling = SamplingParams(temperature=e.temperature, top_p=e.top_p, top_k=e.top_k,
                                  max_new_tokens=self.cfg.policy.max_new_tokens,
                                  stop_token_ids=self.codec.stop_token_ids)
        return self.rollout(specs, self.eval_settings, sampling, torch.Generator().manual_seed(seed), env_settings)


def selection_score(metrics: dict[str, float], game: str, num_episodes: int, select_on: str) -> float:
    """The figure that picks the best policy (``train.select_on``)."""
    if select_on == "exact_greedy":
        return metrics[f"eval/all/{task(game).headline}_exact_ep{num_episodes}"]
    return headline(metrics, game, num_episodes)


def headline(metrics: dict[str, float], game: str, num_episodes: int, prefix: str = "eval") -> float:
    """The number a run is judged by: final-episode chips (Kuhn) or success."""
    key = task(game).headline
    return metrics[f"{prefix}/all/{key}_ep{num_episodes}"]
