"""The policy's first Kuhn hand read from its scores (``MetaRLTrainer.first_hand_*``):
every infoset reached as planned, probabilities equal to those the rollout itself
samples with, and the exact exploitability of the resulting strategy."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from mage_core.trainers import strategy_probes
from mage_core.generation import SamplingParams
from mage_core.config import parse_config
from mage_core.envs.kuhn_poker.analysis import exploitability
from mage_core.evaluation.kuhn_exact import fix_deals
from mage_core.policy.model import load_policy
from mage_core.rollout.meta_episode import MetaEpisodeSpec
from mage_core.rollout.runner import meta_episode_seeds
from mage_core.stages.train import build_policy, make_codec, make_generator
from mage_core.trainers.meta_rl import MetaRLTrainer

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def trainer(tmp_path_factory: pytest.TempPathFactory) -> MetaRLTrainer:
    cfg = parse_config({"env": {"name": "kuhn_poker"}, "tournament": {"matches": []}})
    out: Path = tmp_path_factory.mktemp("policy")
    build_policy(cfg, out)
    model, tokenizer = load_policy(out / "policy-init")
    generator = make_generator(cfg, tokenizer, out / "policy-init", model, copy_model=False)
    return MetaRLTrainer(cfg, None, generator, make_codec(tokenizer, cfg.policy))


def test_first_hand_strategy_is_what_the_rollout_samples_from(trainer: MetaRLTrainer) -> None:
    strategy = strategy_probes.first_hand_strategy(trainer)
    assert sorted(strategy.p_bet) == sorted(["J", "Q", "K", "Jpb", "Qpb", "Kpb", "Jp", "Qp", "Kp", "Jb", "Qb", "Kb"])
    assert all(0 < float(p) < 1 for p in strategy.p_bet.values())  # an untrained policy, temperature 1
    # The opening bets of a suite where the agent opens are the same numbers.
    opening = strategy_probes.opening_bets(trainer, parse_config({"population": {"kuhn_poker": "probe"}}).population.entries(
        "kuhn_poker"))
    assert [opening[f"all/opening_bet_{c}_ep1"] for c in "JQK"] == pytest.approx(
        [float(strategy.p_bet[c]) for c in "JQK"], abs=1e-6)  # other batches: float32 rounding
    # Play K as first player against `aggressive` (which bets after a check): where the agent
    # checked, its next decision is at Kpb, and the log-prob it sampled with is the strategy's.
    specs = [MetaEpisodeSpec("kuhn_poker", "aggressive", 0, 0, i) for i in range(24)]
    metas = trainer.build(specs, trainer.eval_settings)
    fix_deals(metas, [[(2, 0)]] * len(metas))
    sampling = SamplingParams(temperature=1.0, max_new_tokens=trainer.cfg.policy.max_new_tokens,
                              stop_token_ids=trainer.codec.stop_token_ids)
    metas = trainer.play(metas, trainer.actor(sampling), meta_episode_seeds(torch.Generator().manual_seed(3), 24))
    checked = [m for m in metas if m.decisions[0].choice == 0]  # candidates: PASS, BET
    assert checked, "no meta-episode checked K first"
    for meta in metas:
        first = meta.decisions[0]
        p_first = float(strategy.p_bet["K"]) if first.choice == 1 else 1 - float(strategy.p_bet["K"])
        assert math.exp(first.logprob) == pytest.approx(p_first, rel=1e-5)
    for meta in checked:
        second = meta.decisions[1]
        p_second = float(strategy.p_bet["Kpb"]) if second.choice == 1 else 1 - float(strategy.p_bet["Kpb"])
        assert math.exp(second.logprob) == pytest.approx(p_second, rel=1e-5)


def test_first_hand_exploitability_is_exact_for_the_read_strategy(trainer: MetaRLTrainer) -> None:
    metrics = strategy_probes.first_hand_exploitability(trainer)
    strategy = strategy_probes.first_hand_strategy(trainer)
    assert metrics["eval/first_hand/exploitability"] == float(exploitability(strategy))
    assert metrics["eval/first_hand/exploitability"] > 0  # an untrained policy is no equilibrium
    assert metrics["eval/first_hand/p_bet_Kb"] == float(strategy.p_bet["Kb"])
