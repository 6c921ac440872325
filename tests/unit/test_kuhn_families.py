"""Generated Kuhn opponent families (``opponents.kuhn_families``): the draws, the config, the exact ceilings."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from mage_core.config import ConfigError, parse_config
from mage_core.envs.kuhn_poker.analysis import (
    bayes_optimal_meta_value,
    best_response,
    mean_over_seats,
    type_known_value,
)
from mage_core.envs.kuhn_poker.rules import ALL_INFOSETS
from mage_core.opponents.kuhn import BehaviourStrategy, uniform_random
from mage_core.opponents.kuhn_families import KuhnFamily, member, members
from mage_core.opponents.population import Population
from mage_core.opponents.registry import make_opponent

pytestmark = pytest.mark.unit


def test_members_are_exact_grid_fractions_drawn_from_their_own_streams() -> None:
    small, large = KuhnFamily(count=4, seed=3), KuhnFamily(count=50, seed=3)
    drawn = members("f", small)
    assert list(drawn) == ["f-0", "f-1", "f-2", "f-3"]
    for table in drawn.values():
        assert list(table) == list(ALL_INFOSETS)
        assert all(isinstance(p, Fraction) and 0 <= p <= 1 and (p * 100).denominator == 1 for p in table.values())
    # member i depends on (seed, i) only: not on the family's size, and not on the other members
    assert all(member(large, i) == drawn[f"f-{i}"] for i in range(4))
    assert member(KuhnFamily(count=4, seed=4), 0) != drawn["f-0"]
    assert len({tuple(t.values()) for t in drawn.values()}) == 4
    with pytest.raises(ValueError, match=r"member index must be an int in \[0, 4\), got 4"):
        member(small, 4)
    with pytest.raises(ValueError, match="count must be an int >= 1, got 0; alpha must be a number > 0, got -1"):
        KuhnFamily(count=0, alpha=-1)


def test_the_draws_follow_the_beta_prior() -> None:
    # Beta(2, 5): mean 2/7, sd sqrt(ab / ((a+b)^2 (a+b+1))) = sqrt(10/392); 2000 members x 12 infosets.
    family = KuhnFamily(count=2000, seed=11, alpha=2.0, beta=5.0, grid=1000)
    values = np.array([float(p) for table in members("f", family).values() for p in table.values()])
    standard_error = math.sqrt(10 / 392) / math.sqrt(values.size)
    assert abs(values.mean() - 2 / 7) < 5 * standard_error + 1 / 2000  # (+ the grid's rounding, at most half a step)
    # P(p < 0.1) under Beta(2, 5): 1 - sum_{j<2} C(6, j) 0.1^j 0.9^(6-j) = 1 - 0.9^6 - 6 * 0.1 * 0.9^5
    below = 1 - 0.9**6 - 6 * 0.1 * 0.9**5
    assert abs((values < 0.1).mean() - below) < 5 * math.sqrt(below * (1 - below) / values.size) + 0.002


FAMILIES = {"kuhn_families": {"gen": {"count": 4, "seed": 1}, "held": {"count": 3, "seed": 2, "alpha": 0.5,
                                                                         "beta": 0.5}}}


def test_a_family_stands_for_its_members_in_populations_and_suites() -> None:
    cfg = parse_config({
        "opponents": FAMILIES,
        "population": {"kuhn_poker": [{"opponent": "gen", "weight": 0.6, "seat": "first"},
                                      {"opponent": "conservative", "weight": 0.4}]},
        "evaluation": {"ood": {"kuhn_poker": {"unseen": "held", "cfr": "held_out"}}},
    })
    entries = cfg.population.entries("kuhn_poker")
    assert [(e.opponent, e.weight, e.seat) for e in entries] == [
        *[(f"gen-{i}", pytest.approx(0.15), "first") for i in range(4)], ("conservative", 0.4, "mixed")]
    assert Population(entries).probabilities()[("gen-2", 0)] == pytest.approx(0.15)
    assert [e.opponent for e in cfg.evaluation.ood.entries("kuhn_poker", "unseen")] == ["held-0", "held-1", "held-2"]
    assert [e.opponent for e in cfg.evaluation.ood.entries("kuhn_poker", "cfr")] == ["cfr"]
    # a family's name alone is the whole family; its members are opponents like any other
    alone = parse_config({"opponents": FAMILIES, "population": {"kuhn_poker": "held"}})
    assert [(e.opponent, e.weight) for e in alone.population.entries("kuhn_poker")] == [
        (f"held-{i}", pytest.approx(1 / 3)) for i in range(3)]
    settings = cfg.opponents.settings()
    player = make_opponent("kuhn_poker", "held-1", settings)
    assert isinstance(player, BehaviourStrategy) and dict(player.p_bet) == member(KuhnFamily(3, 2, "beta", 0.5, 0.5),
                                                                                   1)
    # A re-parse of the dumped config (a run's saved params) gives the same population.
    again = parse_config(cfg.model_dump(mode="json"))
    assert again.population.entries("kuhn_poker") == entries


@pytest.mark.parametrize(("data", "problem"), [
    ({"opponents": {"kuhn_families": {"paper": {"count": 2}}}},
     "opponents: kuhn_families.paper: its names (paper, paper-0 .. paper-1) clash with the population preset paper; "
     "choose another name"),
    ({"opponents": {"kuhn_families": {"cfr": {"count": 2}}}},
     "opponents: kuhn_families.cfr: its names (cfr, cfr-0 .. cfr-1) clash with cfr; choose another name"),
    ({"opponents": {"kuhn_families": {"gen": {"count": 4}},
                    "kuhn_strategies": {"gen-2": {k: 0.5 for k in ALL_INFOSETS}}}},
     "opponents: kuhn_families.gen: its names (gen, gen-0 .. gen-3) clash with gen-2; choose another name"),
    ({"opponents": {"kuhn_families": {"gen": {"count": 0}}}},
     "opponents.kuhn_families.gen.count: Input should be greater than or equal to 1 (got 0)"),
    ({"opponents": {"kuhn_families": {"Gen-2": {"count": 2}}}},
     "opponents.kuhn_families.Gen-2.[key]: String should match pattern '^[a-z][a-z0-9_]*$' (got 'Gen-2')"),
    ({"opponents": FAMILIES, "population": {"kuhn_poker": [{"opponent": "gen-4"}]}},
     "population.kuhn_poker[0].opponent: 'gen-4' is not an opponent of kuhn_poker; valid: random, conservative, "
     "aggressive, intermediate, tight_caller, calling_station, maniac, station, polar_bluffer, trapper, "
     "equilibrium-<alpha in [0,1/3]>, cfr, cfr_argmax, gen, gen-<0..3>, held, held-<0..2>"),
    ({"opponents": {"kuhn_families": {"mixed": {"count": 2, "prior": "styles", "styles": ["maniac", "nope"]}}}},
     "opponents.kuhn_families.mixed: unknown style 'nope'; styles: maniac, station, polar_bluffer, "
     "trapper, tight_caller, calling_station, conservative, aggressive, intermediate"),
    ({"opponents": {"kuhn_families": {"mixed": {"count": 2, "prior": "styles", "styles": ["maniac"]}}}},
     "opponents.kuhn_families.mixed: styles must name at least two distinct styles, got ['maniac']"),
])
def test_bad_families_are_named_with_the_fix(data: dict, problem: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(data)
    assert err.value.problems == [problem]


def _mix(family: KuhnFamily) -> list[tuple[int, BehaviourStrategy]]:
    return [(1, BehaviourStrategy(name, table)) for name, table in members("f", family).items()]


def test_a_family_of_identical_players_leaves_nothing_to_learn() -> None:
    # alpha = beta = 10^7 and a grid of 2: every P(BET) rounds to 1/2, every member is the random player.
    mix = _mix(KuhnFamily(count=3, seed=5, alpha=1e7, beta=1e7, grid=2))
    assert all(dict(s.p_bet) == dict(uniform_random().p_bet) for _, s in mix)
    for seat in (0, 1):
        known = best_response([(1, uniform_random())], seat)[0]
        for restart in ("fresh", "same"):
            assert bayes_optimal_meta_value(mix, 1, restart, seat) == known
        assert bayes_optimal_meta_value(mix, 3, "fresh", seat) == known  # fresh deals: nothing carries over


def test_the_exact_ceiling_of_a_family_is_ordered_as_information_allows() -> None:
    mix = _mix(KuhnFamily(count=6, seed=9, alpha=0.5, beta=0.5))
    fixed = mean_over_seats(lambda seat: bayes_optimal_meta_value(mix, 1, "fresh", seat))
    values = [mean_over_seats(lambda seat: bayes_optimal_meta_value(mix, k, "fresh", seat)) for k in (1, 2, 3)]
    known = mean_over_seats(lambda seat: type_known_value(mix, seat))
    assert values[0] == fixed == mean_over_seats(lambda seat: best_response(mix, seat)[0])
    assert values[0] < values[1] < values[2] < known  # more hands, more to learn; never more than knowing the type
    # One member: its type is known from the start.
    one = _mix(KuhnFamily(count=1, seed=9, alpha=0.5, beta=0.5))
    assert bayes_optimal_meta_value(one, 3, "fresh", 0) == best_response(one, 0)[0]


def test_the_styles_best_responses_are_worth_what_a_hand_count_gives() -> None:
    # Against a maniac or a station a best response earns 1/3 a hand in either seat: K wins 2 (a bet
    # called), Q breaks even, J loses 1 (a fold, or a check to showdown). Against the trapper, 1/6:
    # K bets and wins 1 (J folds) or 2 (Q calls), Q checks to a 0 showdown, J checks and loses 1.
    for name, value in (("maniac", Fraction(1, 3)), ("station", Fraction(1, 3)), ("trapper", Fraction(1, 6))):
        opponent = make_opponent("kuhn_poker", name)
        assert [best_response([(1, opponent)], seat)[0] for seat in (0, 1)] == [value, value], name


def test_a_styles_member_mixes_two_distinct_styles_on_the_grid() -> None:
    from mage_core.opponents.kuhn import ARCHETYPES, PROBES, STYLES

    known = {**STYLES, **PROBES, **ARCHETYPES}
    family = KuhnFamily(count=40, seed=5, prior="styles", grid=12)
    pairs = set()
    for name, table in members("mix", family).items():
        assert all(p.denominator in (1, 2, 3, 4, 6, 12) for p in table.values())
        # some pair of the family's styles and some weight w = j/12 give every probability exactly
        found = [(a, b) for a in family.styles for b in family.styles if a != b
                 for j in range(13)
                 if all(table[k] == Fraction(round((Fraction(j, 12) * known[a].p_bet[k]
                                                    + (1 - Fraction(j, 12)) * known[b].p_bet[k]) * 12), 12)
                        for k in ALL_INFOSETS)]
        assert found, name
        pairs.add(frozenset(found[0]))
    assert len(pairs) >= 8  # 40 members spread over the 15 pairs of six styles
    assert members("mix", family) == members("mix", KuhnFamily(count=40, seed=5, prior="styles", grid=12))
    assert members("mix", family) != members("mix", KuhnFamily(count=40, seed=6, prior="styles", grid=12))
