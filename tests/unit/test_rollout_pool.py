"""Rollout jobs split into contiguous shares, played by workers, pickled back:
the pieces of the Ray pool that need no Ray (the pool itself:
tests/integration/test_ray_rollout.py)."""

from __future__ import annotations

import importlib.util
import pickle

import numpy as np
import pytest
import torch

from mage_core.generation import SamplingParams
from mage_core.backends.hf import HFGenerator
from mage_core.config import ConfigError, parse_config
from mage_core.rollout.pool import (
    RolloutJob,
    RolloutWorker,
    attach_codec,
    build_meta_episodes,
    contiguous_shares,
    detach_codec,
)
from mage_core.rollout.meta_episode import MetaEpisodeSpec, Response
from mage_core.rollout.runner import meta_episode_seeds
from mage_core.stages.train import config_digest
from mage_core.trainers.meta_rl import meta_settings
from tests.envcases import OPPONENT_SETTINGS
from tests.rolloutcases import decisions_of, logprobs_of, tiny_policy

pytestmark = pytest.mark.unit


def test_contiguous_shares_cover_in_order_and_differ_by_one_at_most() -> None:
    assert contiguous_shares(10, 3) == [(0, 4), (4, 7), (7, 10)]
    assert contiguous_shares(2, 4) == [(0, 1), (1, 2)]  # no empty shares
    assert contiguous_shares(0, 2) == []
    for count in range(0, 30):
        for workers in range(1, 6):
            shares = contiguous_shares(count, workers)
            assert [i for a, b in shares for i in range(a, b)] == list(range(count))
            assert not shares or max(b - a for a, b in shares) - min(b - a for a, b in shares) <= 1
    with pytest.raises(ValueError, match="num_workers must be >= 1"):
        contiguous_shares(3, 0)


@pytest.mark.parametrize("game", ["tic_tac_toe", "kuhn_poker", "sokoban"])
def test_finished_meta_episodes_pickle_without_their_tokenizer(game: str) -> None:
    cfg = parse_config({"env": {"name": game}, "population": {"tic_tac_toe": [{"opponent": "mcts-25"}]}})
    settings = meta_settings(cfg, game, 2, True)
    opponent = {"tic_tac_toe": "mcts-25", "kuhn_poker": "cfr", "sokoban": None}[game]
    spec = MetaEpisodeSpec(game, opponent, 1 if opponent else 0, 7, 0)
    codec = tiny_policy("constrained").codec
    [meta] = build_meta_episodes(game, [spec], settings, getattr(cfg.env, game), OPPONENT_SETTINGS,
                                 codec.encode_prompt, codec.encode_action)
    while not meta.done:
        request = meta.request()
        meta.apply(request, Response(request.candidate_texts[0], -0.5, choice=0))  # type: ignore[index]
    with pytest.raises(Exception):
        pickle.dumps(meta)  # the codec's closures (and the tokenizer) do not travel
    detach_codec([meta])
    back = pickle.loads(pickle.dumps(meta))
    assert decisions_of([back]) == decisions_of([meta]) and back.done
    assert [(e.reward, e.outcome, e.num_turns) for e in back.episodes] == [
        (e.reward, e.outcome, e.num_turns) for e in meta.episodes]
    with pytest.raises(RuntimeError, match="attach_codec"):
        back.encode("x")
    attach_codec([back], codec)
    assert back.encode("kuhn") == codec.encode_prompt("kuhn")


@pytest.mark.parametrize("mode", ["constrained", "free"])
def test_workers_on_contiguous_shares_equal_the_in_process_rollout(mode: str) -> None:
    policy = tiny_policy(mode)
    trainer = policy.trainer()
    specs = trainer.sample_specs(np.random.default_rng(4))
    sampling = trainer.train_sampling()
    expected = trainer.rollout(specs, trainer.train_settings, sampling, torch.Generator().manual_seed(2))

    seeds = meta_episode_seeds(torch.Generator().manual_seed(2), len(specs))
    job = RolloutJob(tuple(specs), trainer.train_settings, trainer._env_settings, sampling, tuple(seeds))
    got = []
    for start, stop in contiguous_shares(len(specs), 3):
        worker = RolloutWorker(trainer.game, trainer.cfg.opponents.settings(),
                               HFGenerator(policy.trainer().generator.model, policy.tokenizer.pad_token_id),
                               policy.codec)
        got += pickle.loads(pickle.dumps(worker.run(job.share(start, stop))))
    attach_codec(got, policy.codec)
    assert [m.spec for m in got] == list(specs)
    assert decisions_of(got) == decisions_of(expected)
    assert np.allclose(logprobs_of(got), logprobs_of(expected), rtol=0, atol=1e-5)


def test_a_job_needs_one_seed_per_spec() -> None:
    cfg = parse_config({})
    trainer_settings = meta_settings(cfg, "kuhn_poker", 3, True)
    spec = MetaEpisodeSpec("kuhn_poker", "random", 0, 1, 0)
    with pytest.raises(ValueError, match="one seed per spec: 1 specs, 2 seeds"):
        RolloutJob((spec,), trainer_settings, cfg.env.kuhn_poker, SamplingParams(), (1, 2))
    job = RolloutJob((spec, spec, spec), trainer_settings, cfg.env.kuhn_poker, SamplingParams(), (1, 2, 3))
    assert job.share(1, 3).seeds == (2, 3) and len(job.share(1, 3).specs) == 2


# -- rollout.workers and rollout.ray_address in params ----------------------------------------------


def _problems(data: dict) -> list[str]:
    with pytest.raises(ConfigError) as err:
        parse_config(data)
    return err.value.problems


def test_rollout_workers_config_errors_name_the_key_and_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = parse_config({"rollout": {"workers": 2, "ray_address": "ray://head:10001"}})
    assert (cfg.rollout.workers, cfg.rollout.ray_address) == (2, "ray://head:10001")
    assert parse_config({}).rollout.workers == 0 and parse_config({}).rollout.ray_address is None
    assert _problems({"rollout": {"workers": -1}}) == [
        "rollout.workers: Input should be greater than or equal to 0 (got -1)"]
    assert _problems({"rollout": {"ray_address": ""}}) == [
        "rollout.ray_address: String should have at least 1 character (got '')"]
    # vLLM engines may run on the actors (tests/vllm/test_vllm_ranks.py); a served model may not
    assert parse_config({"rollout": {"workers": 2}, "backend": {"generator": "vllm"}}).rollout.workers == 2
    assert _problems({"rollout": {"workers": 2}, "backend": {"generator": "openai", "openai": {"model": "m"}}}) == [
        "rollout.workers: Ray rollout workers each run a copy of the policy (HF or vLLM); backend.generator openai "
        "is a served model with its own parallelism: set rollout.workers: 0 (backend.openai.max_concurrency sets "
        "its parallel requests)"]
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "ray" else real_find_spec(name, *a))
    assert parse_config({"rollout": {"workers": 0}}).rollout.workers == 0  # no Ray needed in-process
    [problem] = _problems({"rollout": {"workers": 2}})
    assert problem.startswith("rollout.workers: 2 Ray workers need Ray, which is not installed: "
                              "pip install -e '.[pipeline]'")


def test_where_rollouts_run_is_not_part_of_a_runs_identity() -> None:
    base = config_digest(parse_config({}))
    assert config_digest(parse_config({"rollout": {"workers": 2, "ray_address": "auto"}})) == base
    assert config_digest(parse_config({"rollout": {"temperature": 0.5}})) != base


def test_vllm_sleep_needs_a_colocated_vllm_engine_on_gpus() -> None:
    gpu = {"generator": "vllm", "engine": "deepspeed", "gpus": 2, "ranks": 2, "vllm_sleep": True}
    cfg = parse_config({"backend": gpu})
    assert cfg.backend.vllm_sleep and cfg.vllm_engine()["enable_sleep_mode"] is True
    assert parse_config({}).vllm_engine() == {"dtype": "float32", "seed": parse_config({}).seed,
                                              "gpu_memory_utilization": 0.5, "enable_sleep_mode": False}
    sleep_needs = ("backend: vllm_sleep: frees a colocated vLLM engine's GPU memory during each update; it needs "
                   "generator 'vllm' and gpus > 0 (vLLM's sleep mode is CUDA, ROCm or XPU only)")
    assert _problems({"backend": {"generator": "vllm", "vllm_sleep": True}}) == [sleep_needs]  # a CPU run
    assert _problems({"backend": {**gpu, "generator": "hf"}}) == [sleep_needs]
    assert _problems({"backend": gpu, "rollout": {"workers": 2}}) == [
        "backend.vllm_sleep: the vLLM engines of rollout.workers run on Ray actors, beside no training step; set "
        "backend.vllm_sleep: false (or rollout.workers: 0)"]
