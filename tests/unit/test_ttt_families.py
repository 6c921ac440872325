"""Generated Tic-Tac-Toe opponents (issue 15): seeded families of pattern players
with random orders and MCTS players with random budgets, each with its own noise;
declared in params.yaml, expanded in populations and OOD suites, built by name."""

from __future__ import annotations

import numpy as np
import pytest

from mage_core.config import ConfigError, parse_config
from mage_core.envs.tic_tac_toe.rules import EMPTY, TicTacToeState
from mage_core.envs.tic_tac_toe.best_response import MoveDistributions
from mage_core.opponents.mcts import MCTSPlayer
from mage_core.opponents.patterns import PatternPlayer
from mage_core.opponents.registry import make_opponent
from mage_core.opponents.ttt_families import NoisyPlayer, TicTacToeFamily, member, members

pytestmark = pytest.mark.unit

FAMILIES = {"orders": {"count": 6, "seed": 1},
            "searchers": {"count": 5, "seed": 2, "kind": "mcts", "simulations": [10, 400], "noise": [0.05, 0.3]}}


def test_members_are_seeded_draws_in_their_ranges() -> None:
    orders = members("orders", TicTacToeFamily(count=6, seed=1))
    assert list(orders) == [f"orders-{i}" for i in range(6)]
    assert all(sorted(spec["order"]) == list(range(9)) and spec["noise"] == 0 for spec in orders.values())
    assert len({spec["order"] for spec in orders.values()}) == 6  # six different players
    # A member depends on (seed, index) only: not on the family's size; another seed, other players.
    assert member(TicTacToeFamily(count=60, seed=1), 3) == orders["orders-3"]
    assert member(TicTacToeFamily(count=6, seed=2), 3) != orders["orders-3"]
    searchers = members("s", TicTacToeFamily(count=50, seed=2, kind="mcts", simulations=(10, 400), noise=(0.05, 0.3)))
    budgets = [spec["simulations"] for spec in searchers.values()]
    noises = [spec["noise"] for spec in searchers.values()]
    assert all(10 <= b <= 400 for b in budgets) and all(0.05 <= p <= 0.3 for p in noises)
    assert min(budgets) < 40 and max(budgets) > 100  # log-uniform: both ends of the range are used
    with pytest.raises(ValueError, match="member index must be an int in \\[0, 6\\)"):
        member(TicTacToeFamily(count=6), 6)


def test_bad_family_fields_are_named() -> None:
    with pytest.raises(ValueError, match="simulations must be \\[low, high\\] with 2 <= low <= high"):
        TicTacToeFamily(count=1, kind="mcts", simulations=(1, 5))
    with pytest.raises(ConfigError) as caught:
        parse_config({"opponents": {"ttt_families": {
            "a": {"count": 0}, "b": {"count": 2, "noise": [0.5, 0.1]}, "c": {"count": 1, "kind": "minimax"}}}})
    text = "\n".join(caught.value.problems)
    assert "opponents.ttt_families.a.count" in text
    assert "noise must be [low, high] with low <= high, got [0.5, 0.1]" in text
    assert "opponents.ttt_families.c.kind" in text
    with pytest.raises(ConfigError) as caught:  # names: checked once every family is well formed
        parse_config({"opponents": {"ttt_families": {"balanced": {"count": 1}, "mcts": {"count": 3}}}})
    text = "\n".join(caught.value.problems)
    assert "ttt_families.balanced: its names" in text and "the population preset balanced" in text
    assert "ttt_families.mcts: its names (mcts, mcts-0 .. mcts-2) clash with mcts-2" in text  # MCTS-2


def test_a_family_name_stands_for_its_members_in_populations_and_suites() -> None:
    cfg = parse_config({"env": {"name": "tic_tac_toe"}, "opponents": {"ttt_families": FAMILIES},
                        "population": {"tic_tac_toe": [{"opponent": "orders", "weight": 3}, {"opponent": "mcts-100"}]},
                        "evaluation": {"ood": {"tic_tac_toe": {"mcts_1000": "held_out", "searchers": "searchers"}}}})
    entries = cfg.population.entries("tic_tac_toe")
    assert [(e.opponent, e.weight) for e in entries] == [(f"orders-{i}", 0.5) for i in range(6)] + [("mcts-100", 1.0)]
    assert [e.opponent for e in cfg.evaluation.ood.entries("tic_tac_toe", "searchers")] == [
        f"searchers-{i}" for i in range(5)]
    whole = parse_config({"opponents": {"ttt_families": FAMILIES}, "population": {"tic_tac_toe": "orders"}})
    assert len(whole.population.entries("tic_tac_toe")) == 6
    with pytest.raises(ConfigError, match="orders-6"):  # no seventh member
        parse_config({"opponents": {"ttt_families": FAMILIES}, "population": {"tic_tac_toe": [{"opponent": "orders-6"}]}})


def test_members_are_built_by_name() -> None:
    settings = parse_config({"opponents": {"ttt_families": FAMILIES}}).opponents.settings()
    pattern = make_opponent("tic_tac_toe", "orders-2", settings)
    assert isinstance(pattern, PatternPlayer) and pattern.order == settings.ttt_players["orders-2"]["order"]
    searcher = make_opponent("tic_tac_toe", "searchers-0", settings)
    spec = settings.ttt_players["searchers-0"]
    assert isinstance(searcher, NoisyPlayer) and searcher.noise == spec["noise"]
    assert isinstance(searcher.inner, MCTSPlayer) and searcher.inner.num_simulations == spec["simulations"]


def test_noisy_player_plays_its_mix_and_its_exact_distribution() -> None:
    state = TicTacToeState((EMPTY,) * 9).apply(4)  # X in the centre; O to move, eight empty cells
    pattern = PatternPlayer("p", (4, 0, 1, 2, 3, 5, 6, 7, 8))  # plays 0 here
    assert NoisyPlayer("n0", pattern, 0.0).act(state, np.random.default_rng(0)) == 0
    noisy = NoisyPlayer("n", pattern, 0.4)
    # Exact: 0.4 / 8 on every legal cell, plus 0.6 on the pattern's.
    exact = MoveDistributions(noisy, 1, np.random.default_rng(0))
    assert exact.exact
    distribution = exact(state)
    assert distribution[0] == pytest.approx(0.6 + 0.05) and distribution[8] == pytest.approx(0.05)
    assert sum(distribution.values()) == pytest.approx(1.0)
    rng = np.random.default_rng(1)
    moves = [noisy.act(state, rng) for _ in range(4000)]
    assert abs(moves.count(0) / 4000 - 0.65) < 0.03 and abs(moves.count(8) / 4000 - 0.05) < 0.015
    with pytest.raises(ValueError, match="noise must lie in \\[0, 1\\]"):
        NoisyPlayer("bad", pattern, 1.5)
