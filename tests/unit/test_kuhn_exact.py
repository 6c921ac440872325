"""Exact greedy evaluation of Kuhn meta-episodes (every opponent, seat and deal).

Two fixed policies, played through the real rollout code by a generator that
scores the candidates by a rule (the policy under test is the rule, so its value
is known independently): always BET, and BET only with the K. Neither adapts,
so every hand's exact value is the population average of
``analysis.expected_value`` against each opponent in each seat.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from mage_core.trainers import probes
from mage_core.generation import Generation
from mage_core.config import parse_config
from mage_core.envs.kuhn_poker import analysis
from mage_core.envs.kuhn_poker.exact_greedy import exact_greedy_cases
from mage_core.opponents.population import Population
from mage_core.opponents.registry import make_opponent
from mage_core.policy.tokenizer import build_tokenizer
from mage_core.rollout.corpus import action_tokens, game_corpus
from mage_core.stages.train import make_codec
from mage_core.trainers.meta_rl import MetaRLTrainer

pytestmark = pytest.mark.unit


class RuleGenerator:
    """Scores the two Kuhn candidates by a rule on the prompt's words (greedy picks the higher)."""

    def __init__(self, tokenizer, bet_with: set[str]) -> None:
        self.tokenizer, self.bet_with = tokenizer, bet_with
        self.bet_id = tokenizer.convert_tokens_to_ids("meBET")

    def score(self, prompts, candidates):
        out = []
        for prompt, options in zip(prompts, candidates):
            words = self.tokenizer.convert_ids_to_tokens(prompt)
            card = words[max(i for i, w in enumerate(words) if w.startswith("ep")) + 1]
            bet = card in self.bet_with
            out.append([[0.0 if (c[0] == self.bet_id) == bet else -5.0] for c in options])
        return out

    def generate(self, prompts, sampling, generator) -> list[Generation]:
        raise AssertionError("constrained mode only")

    def load_policy_state(self, state) -> None: ...

    def close(self) -> None: ...


def trainer_for(restart: str, bet_with: set[str]) -> MetaRLTrainer:
    cfg = parse_config({"env": {"name": "kuhn_poker"}, "rollout": {"restart": restart},
                        "tournament": {"matches": []}})
    tokenizer = build_tokenizer(game_corpus(cfg, "compact", meta_episodes_per_game=6),
                                extra_tokens=action_tokens(cfg))
    return MetaRLTrainer(cfg, None, RuleGenerator(tokenizer, bet_with), make_codec(tokenizer))  # type: ignore[arg-type]


def population_value(cfg, agent: dict[str, int]) -> Fraction:
    settings = cfg.opponents.settings()
    total = Fraction(0)
    for (name, seat), p in Population(cfg.population.entries("kuhn_poker")).probabilities().items():
        opponent = make_opponent("kuhn_poker", name, settings)
        total += Fraction(p).limit_denominator(1000) * analysis.expected_value(agent, opponent, seat)
    return total


@pytest.mark.parametrize("restart", ["fresh", "same"])
@pytest.mark.parametrize("bet_with", [{"J", "Q", "K"}, {"K"}])
def test_exact_value_of_fixed_policies_equals_the_analysis(restart: str, bet_with: set[str]) -> None:
    from mage_core.envs.kuhn_poker.rules import ALL_INFOSETS

    trainer = trainer_for(restart, bet_with)
    metrics = probes.exact_greedy_values(trainer)
    agent = {key: int(key[0] in bet_with) for key in ALL_INFOSETS}  # the rule as a P(BET) table
    expected = float(population_value(trainer.cfg, agent))
    for k in (1, 2, 3):
        assert metrics[f"eval/all/chips_exact_ep{k}"] == pytest.approx(expected, abs=1e-12)
    # Per pair: the analysis against that opponent alone.
    aggressive = make_opponent("kuhn_poker", "aggressive", trainer.cfg.opponents.settings())
    assert metrics["eval/aggressive/second/chips_exact_ep3"] == pytest.approx(
        float(analysis.expected_value(agent, aggressive, 1)), abs=1e-12)


def test_cases_enumerate_every_deal_and_a_stochastic_opponent_has_no_exact_sum() -> None:
    cfg = parse_config({"env": {"name": "kuhn_poker"}, "tournament": {"matches": []}})
    settings, entries = cfg.opponents.settings(), cfg.population.entries("kuhn_poker")
    fresh = exact_greedy_cases(entries, settings, 3, "fresh")
    same = exact_greedy_cases(entries, settings, 3, "same")
    assert fresh is not None and same is not None
    assert len(fresh) == 3 * 2 * 6**3 == 1296 and len(same) == 3 * 2 * 6
    assert sum(p for _, _, p in fresh) == pytest.approx(1.0) and sum(p for _, _, p in same) == pytest.approx(1.0)
    assert all(len(deals) == 3 for _, deals, _ in fresh) and all(len(deals) == 1 for _, deals, _ in same)
    cfr = parse_config({"env": {"name": "kuhn_poker"}, "population": {"kuhn_poker": "held_out"},
                        "tournament": {"matches": []}})
    assert exact_greedy_cases(cfr.population.entries("kuhn_poker"), settings, 3, "fresh") is None


def test_fixed_deals_are_played_in_order_then_random_again() -> None:
    import numpy as np

    from mage_core.envs.kuhn_poker.env import KuhnPokerEnv
    from mage_core.envs.kuhn_poker.params import KuhnPokerSettings

    env = KuhnPokerEnv(KuhnPokerSettings(), make_opponent("kuhn_poker", "aggressive", parse_config({}).opponents
                                                             .settings()), 1, np.random.default_rng(0))
    env.reset()
    env.fix_deals([(2, 0), (0, 1)])
    assert env.state.cards == (2, 0)
    env.step("PASS")
    env.reset()
    assert env.state.cards == (0, 1)
    first = KuhnPokerEnv(KuhnPokerSettings(), env.opponent, 0, np.random.default_rng(0))
    first.reset()
    first.step("PASS")  # aggressive bets after a check: the agent is mid-hand
    assert not first.done
    with pytest.raises(RuntimeError, match="already being played"):
        first.fix_deals([(1, 2)])
    with pytest.raises(ValueError, match="not a deal"):
        KuhnPokerEnv(KuhnPokerSettings(), env.opponent, 0, np.random.default_rng(0)).fix_deals([(1, 1)])
