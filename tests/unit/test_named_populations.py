"""Named populations (``opponents.kuhn_populations``, ``opponents.ttt_populations``): a name that
stands for its entries wherever a population is given (a population key, an OOD suite)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mage_core.config import ConfigError, load_config

pytestmark = pytest.mark.unit
PARAMS = Path(__file__).resolve().parents[2] / "params.yaml"


def test_diverse_is_the_six_styles_and_their_mixtures_half_each() -> None:
    cfg = load_config(PARAMS, overrides=["population.kuhn_poker=diverse"])
    entries = cfg.population.entries("kuhn_poker")
    pure = [e for e in entries if not e.opponent.startswith("style_mixtures-")]
    mixed = [e for e in entries if e.opponent.startswith("style_mixtures-")]
    assert [e.opponent for e in pure] == ["maniac", "station", "polar_bluffer", "trapper", "tight_caller",
                                          "calling_station"]
    assert [e.opponent for e in mixed] == [f"style_mixtures-{i}" for i in range(32)]
    assert all(e.weight == 1.0 for e in pure) and all(e.weight == 6 / 32 for e in mixed)  # 6 : 6
    assert all(e.seat == "mixed" for e in entries)


def test_an_ood_suite_and_a_tic_tac_toe_population_may_name_one() -> None:
    cfg = load_config(PARAMS, overrides=[
        "evaluation.ood.kuhn_poker={styles: diverse}",
        "opponents.ttt_populations={weak: [{opponent: random}, {opponent: mcts-100, weight: 3, seat: first}]}",
        "population.tic_tac_toe=weak"])
    assert len(cfg.evaluation.ood.entries("kuhn_poker", "styles")) == 38
    assert [(e.opponent, e.weight, e.seat) for e in cfg.population.entries("tic_tac_toe")] == [
        ("random", 1.0, "mixed"), ("mcts-100", 3.0, "first")]


@pytest.mark.parametrize(("override", "message"), [
    ("opponents.kuhn_populations.paper=[{opponent: cfr}]", "kuhn_populations.paper: the name clashes with the population preset paper"),
    ("opponents.kuhn_populations.style_mixtures=[{opponent: cfr}]", "clashes with the family style_mixtures"),
    ("opponents.kuhn_populations.cfr=[{opponent: maniac}]", "clashes with the opponent cfr"),
    ("opponents.kuhn_populations.mine=[]", "kuhn_populations.mine: a population needs at least one entry"),

    ("population.kuhn_poker=nope", "named populations (opponents.kuhn_populations): diverse"),
])
def test_a_bad_named_population_names_the_key(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match="1 problem") as err:
        load_config(PARAMS, overrides=[override])
    assert message in str(err.value)


def test_a_named_population_is_checked_where_it_is_used() -> None:
    # Unused, a bad entry stops nothing (params.yaml's `diverse` names a family a run may replace)...
    cfg = load_config(PARAMS, overrides=["opponents.kuhn_families={g: {count: 4, seed: 1}}"])
    assert cfg.population.kuhn_poker == "paper"
    # ...used, it is an error that names the key and the opponent.
    with pytest.raises(ConfigError) as err:
        load_config(PARAMS, overrides=["opponents.kuhn_populations.mine=[{opponent: nobody}]",
                                       "population.kuhn_poker=mine"])
    assert "population.kuhn_poker[0].opponent: 'nobody' is not an opponent of kuhn_poker" in str(err.value)
    with pytest.raises(ConfigError) as err:
        load_config(PARAMS, overrides=["opponents.kuhn_families={g: {count: 4, seed: 1}}",
                                       "evaluation.ood.kuhn_poker={styles: diverse}"])
    assert "'style_mixtures' is not an opponent of kuhn_poker" in str(err.value)
