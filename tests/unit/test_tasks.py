"""The task registry (docs/architecture.md, "Tasks"): every environment declares itself once."""

from __future__ import annotations

import numpy as np
import pytest

from mage_core.config import load_config
from mage_core.envs.base import Env
from mage_core.envs.registry import GAMES, TASKS, games_with, initial_state, make_env, resolve, task, two_player_games
from mage_core.opponents.registry import catalogue, make_opponent

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("name", GAMES)
def test_each_task_declares_itself_under_its_registered_name(name: str) -> None:
    spec = task(name)
    assert spec.name == name and TASKS[name] == f"mage_core.envs.{name}.task"
    cls = resolve(spec.env_class)  # Env is a protocol: the class has its methods
    assert isinstance(cls, type) and all(callable(getattr(cls, m, None)) for m in ("reset", "step", "restart"))
    assert spec.two_player == (spec.opponents is not None)  # opponents and seats go together
    assert spec.two_player == (spec.ood_param is None)  # an OOD suite: a population, or an env setting
    assert spec.headline in ("success", spec.score_unit)


def test_the_capabilities_are_those_of_the_games() -> None:
    # Read off the rules by hand: only Tic-Tac-Toe ends level; only Kuhn Poker has exact
    # greedy values, a first hand that reads as a strategy, and a chip headline.
    assert two_player_games() == ("tic_tac_toe", "kuhn_poker")
    assert games_with("draws") == ["tic_tac_toe"]
    assert games_with("exact_values") == games_with("strategy_probes") == games_with("scored") == ["kuhn_poker"]
    assert [g for g in GAMES if task(g).data is not None] == ["webshop", "alfworld"]


def test_reward_bounds_and_scale_from_the_default_params() -> None:
    cfg = load_config("params.yaml", [])
    bounds = {g: task(g).reward_bounds(getattr(cfg.env, g)) for g in GAMES}
    # Kuhn: ante + bet = 2 chips at 5 reward a chip; Tic-Tac-Toe: win 10, loss -10;
    # Sokoban: 7 turns x 3 moves of at worst -0.1 step and -1 box off target, at best
    # 3 boxes on target (1 each) and the 10 bonus; WebShop and ALFWorld: 0 to success 10;
    # MineSweeper: a mine's -0.1 after reveals, or 7 cascades of 2 and the win's 10.
    assert bounds == {"tic_tac_toe": (-10.0, 10.0), "kuhn_poker": (-10.0, 10.0),
                      "sokoban": (pytest.approx(-23.1), 13.0), "webshop": (0.0, 10.0), "alfworld": (0.0, 10.0),
                      "minesweeper": (pytest.approx(-0.1), 24.0)}
    assert task("kuhn_poker").reward_scale(cfg.env.kuhn_poker) == 5.0
    assert task("sokoban").reward_scale(cfg.env.sokoban) == 1.0


def test_two_player_games_build_their_rules_env_and_opponents() -> None:
    cfg = load_config("params.yaml", [])
    rng = np.random.default_rng(0)
    assert list(initial_state("tic_tac_toe", rng).legal_moves()) == list(range(9))
    assert len(initial_state("kuhn_poker", rng).legal_moves()) == 2  # PASS, BET after the deal
    for game in two_player_games():
        assert "random" in catalogue(game).names({})
        env = make_env(game, getattr(cfg.env, game), rng, make_opponent(game, "random"), 1)
        assert isinstance(env, Env)
    with pytest.raises(ValueError, match="'sokoban' is not a two-player game; choose one of tic_tac_toe, kuhn_poker"):
        initial_state("sokoban", rng)
    with pytest.raises(ValueError, match="game 'webshop' has no opponents"):
        catalogue("webshop")
    with pytest.raises(ValueError, match="unknown game 'chess'; choose one of tic_tac_toe, kuhn_poker, sokoban"):
        task("chess")
