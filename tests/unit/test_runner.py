"""Batched rollouts with one generator per meta-episode: a meta-episode's path
does not depend on which meta-episodes share its batch, their order, or how
the batch is split (what lets rollout workers match one process)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mage_core.rollout.runner import (
    PolicyActor,
    meta_episode_seeds,
    run_meta_episodes,
    run_seeded_meta_episodes,
    seeded_generators,
)
from tests.rolloutcases import decisions_of, logprobs_of, tiny_policy

pytestmark = [pytest.mark.unit, pytest.mark.usefixtures("one_thread")]


@pytest.fixture(scope="module", params=["constrained", "free"])
def setup(request):
    policy = tiny_policy(request.param)
    trainer = policy.trainer()
    specs = trainer.sample_specs(np.random.default_rng(3))
    actor = trainer.actor(trainer.train_sampling())
    return trainer, specs, actor


def test_meta_episode_seeds_are_one_draw_of_the_callers_generator() -> None:
    a, b = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    few, many = meta_episode_seeds(a, 3), meta_episode_seeds(b, 300)
    assert torch.equal(a.get_state(), b.get_state())  # the caller's generator moved the same
    assert many[:3] == few  # seed i depends on (that draw, i) only
    assert len(set(many)) == 300 and all(0 <= s < 2**32 for s in many)
    assert meta_episode_seeds(torch.Generator().manual_seed(5), 3) == few
    assert meta_episode_seeds(torch.Generator().manual_seed(6), 3) != few
    assert meta_episode_seeds(a, 3) != few  # the next call gets new seeds
    with pytest.raises(ValueError, match="count must be >= 0"):
        meta_episode_seeds(a, -1)


def test_a_meta_episodes_path_does_not_depend_on_its_batch(setup) -> None:
    trainer, specs, actor = setup
    seeds = meta_episode_seeds(torch.Generator().manual_seed(7), len(specs))

    def play(indices: list[int]) -> dict[int, tuple]:
        metas = trainer.build([specs[i] for i in indices], trainer.train_settings)
        run_seeded_meta_episodes(metas, actor, seeded_generators([seeds[i] for i in indices]))
        return {i: (decisions_of([m])[0], logprobs_of([m])) for i, m in zip(indices, metas)}

    n = len(specs)
    whole = play(list(range(n)))
    assert len({len(d) for d, _ in whole.values()}) > 1 or trainer.cfg.policy.action_mode == "free", \
        "meta-episodes should end at different turns (the batch shrinks under the others)"
    for other in [play(list(reversed(range(n)))), play(list(range(0, n, 2))) | play(list(range(1, n, 2))),
                  play([n - 1])]:
        for i, (decisions, logprobs) in other.items():
            assert decisions == whole[i][0], f"meta-episode {i} took another path"
            assert np.allclose(logprobs, whole[i][1], rtol=0, atol=1e-5)
    # The seeds do matter: swapped seeds give other paths.
    swapped = trainer.build(specs, trainer.train_settings)
    run_seeded_meta_episodes(swapped, actor, seeded_generators(seeds[1:] + seeds[:1]))
    assert decisions_of(swapped) != [whole[i][0] for i in range(n)]


def test_run_meta_episodes_seeds_each_meta_episode_from_the_callers_generator(setup) -> None:
    trainer, specs, actor = setup
    metas = trainer.build(specs, trainer.train_settings)
    rng = torch.Generator().manual_seed(9)
    run_meta_episodes(metas, actor, rng)
    again = trainer.build(specs, trainer.train_settings)
    reference_rng = torch.Generator().manual_seed(9)
    run_seeded_meta_episodes(again, actor, seeded_generators(meta_episode_seeds(reference_rng, len(specs))))
    assert decisions_of(metas) == decisions_of(again)
    assert torch.equal(rng.get_state(), reference_rng.get_state())


def test_decide_needs_one_generator_per_request(setup) -> None:
    trainer, specs, actor = setup
    request = trainer.build(specs[:1], trainer.train_settings)[0].request()
    with pytest.raises(ValueError, match="2 requests but 1 generators"):
        actor.decide([request, request], [torch.Generator()])
    with pytest.raises(ValueError, match="1 meta-episodes but 0 generators"):
        run_seeded_meta_episodes(trainer.build(specs[:1], trainer.train_settings), actor, [])
    # One shared generator still works (all requests draw from it in order).
    assert isinstance(actor, PolicyActor)
    assert len(actor.decide([request, request], torch.Generator().manual_seed(0))) == 2


def test_rollout_logprobs_are_the_training_engines_own(setup) -> None:
    # train.old_logprobs: rollout reuses what the rollout sampled with instead of a
    # forward pass of the engine: the two must agree (same weights, another batch
    # layout: left padding and a mask in the generator, packed rows in the engine).
    from mage_core.backends.torch_engine import TorchEngine
    from mage_core.trainers.batch import build_samples

    trainer, specs, actor = setup
    metas = trainer.build(specs, trainer.train_settings)
    run_meta_episodes(metas, actor, torch.Generator().manual_seed(11))
    engine = TorchEngine(trainer.generator.model, learning_rate=1e-3)
    recomputed = engine.logprobs(build_samples(metas, trainer.advantage_settings))
    reused = [d.old_logprobs() for m in metas for d in m.decisions]
    assert [len(r) for r in reused] == [len(r) for r in recomputed]
    flat = torch.tensor([x for r in reused for x in r])
    assert flat.numel() > len(reused) or trainer.cfg.policy.action_mode == "constrained"
    torch.testing.assert_close(flat, torch.cat(recomputed), atol=2e-5, rtol=0)
