"""Population presets and seeded (opponent, seat) sampling."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from mage_core.opponents.population import PRESETS, Population, PopulationEntry, preset
from mage_core.opponents.registry import check_opponent_name

pytestmark = pytest.mark.unit


def test_balanced_is_half_mcts_half_patterns_and_random() -> None:
    probs = Population(preset("tic_tac_toe", "balanced")).probabilities()
    assert probs[("mcts-100", 0)] == pytest.approx(0.25)
    assert probs[("mcts-100", 1)] == pytest.approx(0.25)
    weak = {name for name, _ in probs} - {"mcts-100"}
    assert len(weak) == 7 and "random" in weak  # six patterns + random (docs/method.md section 7)
    assert sum(p for (name, _), p in probs.items() if name != "mcts-100") == pytest.approx(0.5)


def test_paper_kuhn_mix_and_mixed_seats() -> None:
    probs = Population(preset("kuhn_poker", "paper")).probabilities()
    assert probs == pytest.approx({
        ("conservative", 0): 0.15, ("conservative", 1): 0.15,
        ("aggressive", 0): 0.15, ("aggressive", 1): 0.15,
        ("intermediate", 0): 0.2, ("intermediate", 1): 0.2,
    })


def test_every_preset_names_valid_opponents() -> None:
    for game, presets in PRESETS.items():
        for name, entries in presets.items():
            for e in entries:
                assert check_opponent_name(game, e.opponent) is None, (game, name, e.opponent)


def test_sampling_is_seeded_and_matches_the_weights() -> None:
    pop = Population(preset("kuhn_poker", "paper"))
    a = pop.sample(np.random.default_rng(7), 20_000)
    b = pop.sample(np.random.default_rng(7), 20_000)
    assert a == b
    counts = Counter((d.opponent, d.agent_seat) for d in a)
    for key, p in pop.probabilities().items():
        # 20k draws: the standard error of a 0.15 frequency is 0.0025; 5 sigma.
        assert abs(counts[key] / 20_000 - p) < 0.0125, key


def test_fixed_seats_are_respected() -> None:
    pop = Population([PopulationEntry("aggressive", 1.0, "second")])
    assert {d.agent_seat for d in pop.sample(np.random.default_rng(0), 100)} == {1}


@pytest.mark.parametrize("bad", [[], [PopulationEntry("x", 0.0)], [PopulationEntry("x", 1.0, "middle")]])  # type: ignore[arg-type]
def test_bad_populations_are_refused(bad: list[PopulationEntry]) -> None:
    with pytest.raises(ValueError):
        Population(bad)


def test_unknown_preset_lists_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="presets: balanced, pattern_skewed"):
        preset("tic_tac_toe", "nope")


def test_sample_rejects_a_seed_instead_of_a_generator() -> None:
    with pytest.raises(TypeError, match="numpy.random.Generator"):
        Population(preset("kuhn_poker", "paper")).sample(3, 1)  # type: ignore[arg-type]
