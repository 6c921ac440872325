"""`mage kuhn analyze` numbers for configured populations (docs/method.md section 11)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from mage_core.envs.kuhn_poker.ceilings import population_mixes
from mage_core.opponents.population import PopulationEntry, preset
from mage_core.opponents.registry import OpponentSettings
from mage_core.envs.kuhn_poker.commands import population_ceilings
from mage_core.stages import analyze

pytestmark = pytest.mark.unit


def total_row(entries: list[PopulationEntry]) -> dict[str, object]:
    rows = population_ceilings(population_mixes(entries, OpponentSettings()), num_hands=3)
    assert rows[-1]["seat"] == "all (weighted)"
    return rows[-1]


def test_paper_population_ceilings() -> None:
    row = total_row(preset("kuhn_poker", "paper"))
    assert row["best fixed strategy"] == Fraction(1, 8)
    assert row["opponent known"] == Fraction(11, 40)
    assert row["Bayes K=3 fresh"] == Fraction(257, 1080)
    assert row["Bayes K=3 same"] == Fraction(23, 60)
    # Two hands of the best fixed strategy, then a best response: 0.2356 of 0.2380 (issue 15).
    assert row["passive K=3 fresh"] == Fraction(509, 2160)
    assert row["passive K=3 same"] == Fraction(7, 30)


def test_uniform_population_ceilings() -> None:
    row = total_row(preset("kuhn_poker", "uniform"))
    assert row["best fixed strategy"] == Fraction(1, 9)
    assert row["opponent known"] == Fraction(5, 18)
    assert row["Bayes K=3 fresh"] == Fraction(157, 648)
    assert row["Bayes K=3 same"] == Fraction(7, 18)


def test_fixed_seat_population_uses_that_seat_only() -> None:
    # Against conservative alone, as the second player: the best response earns 1/3
    # whether or not the agent knows the opponent (docs/method.md section 11).
    rows = population_ceilings(
        population_mixes([PopulationEntry("conservative", 1.0, "second")], OpponentSettings()), 0)
    assert [r["seat"] for r in rows] == ["second", "all (weighted)"]
    assert rows[-1]["best fixed strategy"] == rows[-1]["opponent known"] == Fraction(1, 3)


def test_cli_run_prints_the_tables(project_root: Path, capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # no wrapped cells
    assert analyze.run("kuhn_poker", str(project_root / "params.yaml"), meta_hands=2) == 0
    out = capsys.readouterr().out
    assert "Bayes K=2 fresh" in out and "1/8" in out and "11/40" in out


def test_cli_run_prints_each_family_prior(project_root: Path, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from mage_core.envs.kuhn_poker.analysis import beta_prior_meta_value, mean_over_seats

    monkeypatch.setenv("COLUMNS", "250")
    family = "opponents.kuhn_families={g: {count: 4, seed: 1, alpha: 0.5, beta: 0.5}}"
    assert analyze.run("kuhn_poker", str(project_root / "params.yaml"), [family], meta_hands=2) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("│ g "))
    bayes = mean_over_seats(lambda seat: beta_prior_meta_value(Fraction(1, 2), Fraction(1, 2), 2, "fresh", seat))
    assert "Beta(0.5, 0.5)" in row and f"{float(bayes):.4f}" in row and "0.4583" in row  # 11/24: best fixed
    assert "+-" in row  # opponent known: sampled, with its standard error
