"""The tasks' experts and the demonstrations they play (mage_core/rollout/imitation.py)."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from mage_core.config import parse_config
from mage_core.envs.base import Outcome
from mage_core.envs.minesweeper.board import Board, mine_probabilities
from mage_core.envs.minesweeper.env import MineSweeperEnv, cell_text
from mage_core.envs.minesweeper.params import MineSweeperSettings
from mage_core.envs.minesweeper.expert import act as minesweeper_expert
from mage_core.envs.registry import GAMES, resolve, task
from mage_core.envs.sokoban.env import SokobanEnv
from mage_core.envs.sokoban.params import SokobanSettings
from mage_core.envs.sokoban.expert import act as sokoban_expert
from mage_core.envs.sokoban.solver import solve_reference
from mage_core.envs.webshop.catalogue import generate_catalogue, load_catalogue, write_catalogue
from mage_core.envs.webshop.env import WebShopEnv
from mage_core.envs.webshop.params import WebShopSettings
from mage_core.envs.webshop.expert import omniscient as webshop_expert
from mage_core.rollout.imitation import play_expert
from mage_core.rollout.meta_episode import MetaEpisodeSpec
from mage_core.rollout.pool import build_meta_episodes
from mage_core.trainers.meta_rl import meta_settings

pytestmark = pytest.mark.unit


def test_every_single_agent_task_names_an_expert() -> None:
    single = [g for g in GAMES if task(g).new_game is None]
    assert all(callable(resolve(task(g).expert)) for g in single)
    assert all(task(g).expert is None for g in GAMES if task(g).new_game is not None)


def test_sokoban_expert_solves_each_level_in_the_fewest_turns() -> None:
    """Turns = ceil(optimal moves / moves per turn), the optimum from the reference solver."""
    settings = SokobanSettings()
    env = SokobanEnv(settings, np.random.default_rng(11))
    rng = np.random.default_rng(0)
    for _ in range(20):
        env.reset()
        optimal = solve_reference(env.level)
        assert optimal is not None
        turns = 0
        while not env.done:
            action = sokoban_expert(env, rng)
            assert action in env.legal_actions()
            result = env.step(action)
            turns += 1
        assert result.outcome is Outcome.WIN
        assert turns == math.ceil(len(optimal) / settings.moves_per_turn)


def test_minesweeper_expert_reveals_a_cell_of_least_mine_probability() -> None:
    # 1-mine corner: the board below has the opened cells of a 4x4 game with one mine at (0, 0),
    # written out by hand; (0, 1), (1, 0) and (1, 1) border it, every other cell is safe.
    board = Board(4, 4, frozenset({(0, 0)}), frozenset()).reveal((3, 3))
    probabilities = mine_probabilities(board, 1)
    assert probabilities[(0, 0)] == Fraction(1) and set(probabilities) == {(0, 0)}  # one closed cell is left
    settings = MineSweeperSettings()
    env = MineSweeperEnv(settings, np.random.default_rng(5))
    rng = np.random.default_rng(1)
    wins = 0
    for _ in range(30):
        env.reset()
        while not env.done:
            probabilities = mine_probabilities(env.board, settings.num_mines)
            action = minesweeper_expert(env, rng)
            chosen = next(cell for cell in probabilities if cell_text(cell) == action)
            assert probabilities[chosen] == min(probabilities.values())
            if any(p == 0 for p in probabilities.values()):
                assert probabilities[chosen] == 0  # a provably safe cell when there is one
            result = env.step(action)
        wins += result.outcome is Outcome.WIN
    assert wins >= 15  # it guesses only where nothing is provably safe


def test_webshop_omniscient_shopper_buys_every_goal_with_the_constrained_search(tmp_path: Path) -> None:
    catalogue = load_catalogue(write_catalogue(generate_catalogue(np.random.default_rng(0), products_per_category=10),
                                               tmp_path))
    env = WebShopEnv(WebShopSettings(), np.random.default_rng(0), catalogue, catalogue.goals)
    rng = np.random.default_rng(0)
    for goal in catalogue.goals[:60]:
        env.set_goal(goal)
        while not env.done:
            action = webshop_expert(env, rng)
            assert action in env.legal_actions()
            result = env.step(action)
        assert env.last_purchase is not None and env.last_purchase.reward == 1.0 and result.reward > 0


def _metas(game: str, count: int, params: dict | None = None) -> list:
    cfg = parse_config({"env": {"name": game}, "rollout": {"restart": "same"}, **(params or {})})
    settings = meta_settings(cfg, game, num_episodes=3, reflect=True)
    specs = [MetaEpisodeSpec(game, None, 0, 100 + i, i) for i in range(count)]
    return build_meta_episodes(game, specs, settings, getattr(cfg.env, game),
                               cfg.opponents.settings(), lambda text: [len(text)], lambda text: [len(text) + 1])


def test_a_demonstration_is_the_experts_play_asked_as_the_policy_is_asked() -> None:
    metas = _metas("sokoban", 4)
    play_expert(metas, sokoban_expert, [np.random.default_rng(i) for i in range(4)])
    for meta in metas:
        assert meta.done and meta.episodes[0].outcome is Outcome.WIN  # early stop after a win
        for d in meta.decisions:
            assert d.phase == "play" and d.candidate_ids is not None and d.choice is not None
            assert d.logprob == 0.0 and not d.invalid


def test_detours_stray_only_in_the_first_attempt_at_the_set_rate() -> None:
    metas = _metas("minesweeper", 40, {"rollout": {"restart": "same", "early_stop": False}})
    strays = []

    def counting_expert(env, rng, memory=()):
        strays.append(len(meta.episodes))
        return minesweeper_expert(env, rng)

    for i, meta in enumerate(metas):
        play_expert([meta], counting_expert, [np.random.default_rng(i)], detour=0.5)
    first = sum(len([d for d in m.decisions if d.episode == 0]) for m in metas)
    asked_first = strays.count(0)
    # every step of attempts 2 and 3 is the expert's; about half of the first attempt's
    assert strays.count(1) + strays.count(2) == sum(len([d for d in m.decisions if d.episode > 0]) for m in metas)
    share = 1 - asked_first / first
    assert abs(share - 0.5) < 3.3 * math.sqrt(0.25 / first)  # within 3.3 standard errors (p < 0.001)


def test_bad_settings_are_named() -> None:
    metas = _metas("sokoban", 1)
    with pytest.raises(ValueError, match=r"detour must be a probability in \[0, 1\], got 1.5"):
        play_expert(metas, sokoban_expert, [np.random.default_rng(0)], detour=1.5)
    with pytest.raises(ValueError, match="2 generators for 1 meta-episodes"):
        play_expert(metas, sokoban_expert, [np.random.default_rng(0)] * 2)
    with pytest.raises(ValueError, match=r"the expert chose 'jump', not one of the 84 legal actions"):
        play_expert(metas, lambda env, rng, memory: "jump", [np.random.default_rng(0)])
    free = _metas("sokoban", 1, {"policy": {"action_mode": "free", "prompt_style": "paper"}})
    with pytest.raises(NotImplementedError, match="demonstrations are constrained actions"):
        play_expert(free, sokoban_expert, [np.random.default_rng(0)])


def test_a_step_the_expert_cannot_plan_is_a_detour_never_its_action() -> None:
    # Sokoban: random pushes from fresh levels until a box can never reach a target (the
    # solver finds no way): the expert then has no action, rather than a made-up one.
    from mage_core.envs.sokoban.solver import solve

    env, rng = SokobanEnv(SokobanSettings(max_turns=50), np.random.default_rng(3)), np.random.default_rng(0)
    stuck = None
    for _ in range(50):
        env.reset()
        while not env.done and solve(env.level):
            legal = env.legal_actions()
            env.step(legal[int(rng.integers(len(legal)))])
        if not env.done:
            stuck = env
            break
    assert stuck is not None and sokoban_expert(stuck, rng) is None
    # play_expert: a step without an expert action is taken at random and recorded as a detour
    metas = _metas("sokoban", 3)
    answers = []

    def sometimes(env, rng, memory=()):  # every other step no answer (a random step may also leave the solver none)
        answers.append(None if len(answers) % 2 == 0 else sokoban_expert(env, rng))
        return answers[-1]

    records = play_expert(metas, sometimes, [np.random.default_rng(i) for i in range(3)])
    assert len(records) == len(answers) and any(a is not None for a in answers)
    assert [r["detour"] for r in records] == [a is None for a in answers]  # detour=0: exactly the Nones
    assert [r["action"] for r, a in zip(records, answers) if a is not None] == [a for a in answers if a is not None]
    assert all(r["action"] in r["candidates"] for r in records)


def test_the_experts_own_attempts_and_their_wins_are_counted() -> None:
    from mage_core.config import ConfigError
    from mage_core.stages.sft import check_expert, expert_success

    cfg = parse_config({"env": {"name": "sokoban"}})
    # The expert alone: every attempt of every meta-episode is won (three a meta-episode).
    metas = _metas("sokoban", 4)
    records = play_expert(metas, sokoban_expert, [np.random.default_rng(i) for i in range(4)])
    assert [len(m.episodes) for m in metas] == [3] * 4 and expert_success(metas, records) == (12, 12)
    check_expert(cfg, metas, records)  # passes
    # An "expert" that moves at random: every attempt is its own (no detour), and its wins are
    # read off the episodes' outcomes.
    metas = _metas("sokoban", 5, {"rollout": {"restart": "same", "early_stop": False}})

    def wanders(env, rng, memory=()):
        legal = env.legal_actions()
        return legal[int(rng.integers(len(legal)))]

    records = play_expert(metas, wanders, [np.random.default_rng(i) for i in range(5)])
    wins = sum(e.outcome is Outcome.WIN for m in metas for e in m.episodes)
    assert expert_success(metas, records) == (wins, 15) and wins < 8
    with pytest.raises(ConfigError) as err:
        check_expert(cfg, metas, records)
    assert err.value.problems == [
        f"warm_start.min_expert_success 0.5: the expert of env.name sokoban won {wins} of its 15 attempts without "
        "a detour, so its demonstrations do not show the task solved; nothing was cloned or written (check the "
        "task's expert and env.sokoban's settings, or lower warm_start.min_expert_success)"]
    # With detours in every first attempt, only the later attempts count.
    metas = _metas("sokoban", 3, {"rollout": {"restart": "same", "early_stop": False}})
    records = play_expert(metas, sokoban_expert, [np.random.default_rng(i) for i in range(3)], detour=1.0)
    assert expert_success(metas, records) == (6, 6)  # attempts 2 and 3 of each, all won
    # An expert that never has a plan played no attempt of its own.
    metas = _metas("sokoban", 2)
    records = play_expert(metas, lambda env, rng, memory: None, [np.random.default_rng(i) for i in range(2)])
    with pytest.raises(ConfigError, match="the expert of env.name sokoban played no attempt on its own"):
        check_expert(cfg, metas, records)
