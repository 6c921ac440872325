"""Reward placing and step returns of one meta-episode against hand-computed values
(docs/method.md sections 3-4)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mage_core.algos.returns import (
    VARIANTS,
    episode_returns,
    meta_episode_returns,
    place_rewards,
    step_returns,
)

pytestmark = pytest.mark.unit


def layout(*episodes: list[float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Steps of a meta-episode: each episode's play rewards, a reflect step before every
    episode but the first (it belongs to the episode after it)."""
    rewards: list[float] = []
    episode: list[int] = []
    is_play: list[bool] = []
    for k, plays in enumerate(episodes):
        if k > 0:
            rewards.append(0.0)
            episode.append(k)
            is_play.append(False)
        rewards.extend(plays)
        episode.extend([k] * len(plays))
        is_play.extend([True] * len(plays))
    return np.array(rewards), np.array(episode), np.array(is_play)


# ------------------------------------------------------------ reference check


def test_method_reference_check_differential() -> None:
    # docs/method.md section 4: lose -10 in 3 moves, reflect, draw in 4, reflect, win +10 in 3.
    rewards, episode, is_play = layout([0, 0, -10], [0, 0, 0, 0], [0, 0, 10])
    ret = meta_episode_returns("differential", rewards, episode, is_play, 0.95, 0.6)
    expected = [-1.868, -1.967, -2.070, 13.216, 13.216, 13.912, 14.644, 15.415, 9.025, 9.025, 9.5, 10.0]
    assert np.round(ret, 3).tolist() == pytest.approx(expected, abs=1e-12)
    # d = (-10, +10, +10) on the last play step of each episode; sum = R_2 = 10.
    placed = place_rewards("differential", rewards, episode, is_play)
    assert placed.tolist() == [0, 0, -10, 0, 0, 0, 0, 10, 0, 0, 0, 10]
    assert episode_returns(rewards, episode, is_play).tolist() == [-10, 0, 10]


# ------------------------------------------------------------ small hand cases

# Lose in 2 (-10), reflect, win in 2 (+10); gamma_step 0.5, gamma_traj 0.25 (exact in binary).
SMALL = layout([0, -10], [0, 10])


@pytest.mark.parametrize(
    ("variant", "placed", "expected"),
    [
        # d = (-10, +20): 20, 10, reflect 10, -10 + 0.25*10 = -7.5, 0.5*-7.5
        ("differential", [0, -10, 0, 0, 20], [-3.75, -7.5, 10, 10, 20]),
        # raw: 10, 5, reflect 5, -10 + 0.25*5 = -8.75, 0.5*-8.75
        ("cumulative", [0, -10, 0, 0, 10], [-4.375, -8.75, 5, 5, 10]),
        # raw, no propagation: 10, 5, reflect 5 | -10, -5
        ("single_episode", [0, -10, 0, 0, 10], [-5, -10, 5, 5, 10]),
        # LaMer's published formula: in-episode (-5, -10 | 5, 10) plus C_0 = 0.25 * g_0^(1) = 1.25
        ("lamer", [0, -10, 0, 0, 10], [-3.75, -8.75, 5, 5, 10]),
    ],
)
def test_small_meta_episode_each_variant(variant: str, placed: list[float], expected: list[float]) -> None:
    rewards, episode, is_play = SMALL
    assert place_rewards(variant, rewards, episode, is_play).tolist() == placed
    assert meta_episode_returns(variant, rewards, episode, is_play, 0.5, 0.25).tolist() == expected


# Sokoban-like: -0.1 per move, +1 for a box on target, +10 for solving.
# Episode 0: moves (-0.1, +1.0, -0.1), R_0 = 0.8; reflect; episode 1: (-0.1, +10), R_1 = 9.9.
SOKOBAN = layout([-0.1, 1.0, -0.1], [-0.1, 10.0])


@pytest.mark.parametrize(
    ("variant", "expected"),
    [
        # placed (0, 0, 0.8 | r 0 | 0, 9.1): 9.1, 4.55, r 4.55, 0.8 + 0.25*4.55 = 1.9375, /2, /4
        ("differential", [0.484375, 0.96875, 1.9375, 4.55, 4.55, 9.1]),
        # 10, -0.1 + 5 = 4.9, r 4.9, -0.1 + 0.25*4.9 = 1.125, 1 + 0.5625, -0.1 + 0.78125
        ("cumulative", [0.68125, 1.5625, 1.125, 4.9, 4.9, 10.0]),
        # 10, 4.9, r 4.9 | -0.1, 1 - 0.05 = 0.95, -0.1 + 0.475 = 0.375
        ("single_episode", [0.375, 0.95, -0.1, 4.9, 4.9, 10.0]),
        # the single-episode returns plus C_0 = 0.25 * 4.9 = 1.225 on episode 0's steps
        ("lamer", [1.6, 2.175, 1.125, 4.9, 4.9, 10.0]),
    ],
)
def test_intermediate_rewards_sokoban_like(variant: str, expected: list[float]) -> None:
    rewards, episode, is_play = SOKOBAN
    ret = meta_episode_returns(variant, rewards, episode, is_play, 0.5, 0.25)
    assert ret == pytest.approx(expected, abs=1e-12)
    assert episode_returns(rewards, episode, is_play) == pytest.approx([0.8, 9.9], abs=1e-12)
    if variant == "differential":
        placed = place_rewards(variant, rewards, episode, is_play)
        assert placed == pytest.approx([0, 0, 0.8, 0, 0, 9.1], abs=1e-12)


def test_meta_episode_stopped_early() -> None:
    # K = 3 planned, stopped after a win in episode 1 (K' = 2): lose in 2, reflect, win in 1.
    rewards, episode, is_play = layout([0, -10], [10])
    placed = place_rewards("differential", rewards, episode, is_play)
    assert placed.tolist() == [0, -10, 0, 20]  # d_1 = 10 - (-10); sum = R_1 = 10
    ret = meta_episode_returns("differential", rewards, episode, is_play, 0.95, 0.6)
    # 20, reflect 20, -10 + 0.6*20 = 2, 0.95*2
    assert ret == pytest.approx([1.9, 2.0, 20.0, 20.0], abs=1e-12)
    assert episode_returns(rewards, episode, is_play).tolist() == [-10, 10]


def test_gamma_traj_once_per_boundary_even_with_several_reflect_steps() -> None:
    # Two reflect steps before episode 1: still one gamma_traj, both get episode 1's first return.
    rewards = np.array([1.0, 0.0, 0.0, 0.0, 4.0])
    episode = np.array([0, 1, 1, 1, 1])
    is_play = np.array([True, False, False, True, True])
    ret = step_returns(rewards, episode, is_play, 0.5, 0.25)
    assert ret.tolist() == [1 + 0.25 * 2, 2, 2, 2, 4]


def test_step_returns_single_episode_restarts_at_boundaries() -> None:
    rewards, episode, is_play = layout([3.0], [5.0], [7.0])
    assert step_returns(rewards, episode, is_play, 0.9, 0.6, crossing="none").tolist() == [3, 5, 5, 7, 7]
    # crossing: 7, r 7, 5 + 0.6*7 = 9.2, r 9.2, 3 + 0.6*9.2 = 8.52
    assert step_returns(rewards, episode, is_play, 0.9, 0.6) == pytest.approx([8.52, 9.2, 9.2, 7, 7])
    # episode start (LaMer's paper): C_1 = 0.6*7 = 4.2, C_0 = 0.6*(5 + 4.2) = 5.52
    assert step_returns(rewards, episode, is_play, 0.9, 0.6, crossing="episode_start") == pytest.approx(
        [8.52, 9.2, 9.2, 7, 7])
    with pytest.raises(ValueError, match="recursive, none, episode_start"):
        step_returns(rewards, episode, is_play, 0.9, 0.6, crossing="across")


# ------------------------------------------------------------ LaMer's published return


def test_lamer_published_return_against_the_recursion() -> None:
    # Issue 42's case: rewards (0, 0, -10 | +10), gamma_step 0.95, gamma_traj 0.6. LaMer's formula
    # G_t = g_t + 0.6 * g_0^(1): 0.95^2*-10 + 6 = -3.025, 0.95*-10 + 6 = -3.5, -10 + 6 = -4; the
    # recursion (MAGE's and LaMer's public code) discounts the 6 by 0.95 per step left: -3.61.
    rewards, episode, is_play = layout([0, 0, -10], [10])
    lamer = meta_episode_returns("lamer", rewards, episode, is_play, 0.95, 0.6)
    assert lamer == pytest.approx([-3.025, -3.5, -4.0, 10.0, 10.0], abs=1e-12)
    recursive = meta_episode_returns("cumulative", rewards, episode, is_play, 0.95, 0.6)
    assert recursive == pytest.approx([-3.61, -3.8, -4.0, 10.0, 10.0], abs=1e-12)


def test_lamer_published_return_three_episodes() -> None:
    # (1, 2 | r | 0, 4 | r | 8), gamma_step 0.5, gamma_traj 0.25. In-episode: 2, 2 | 2, 4 | 8.
    # C_2 = 0, C_1 = 0.25 * 8 = 2, C_0 = 0.25 * 2 + 0.25^2 * 8 = 1 (= 0.25 * (g_0^(1) + C_1)).
    rewards, episode, is_play = layout([1, 2], [0, 4], [8])
    ret = meta_episode_returns("lamer", rewards, episode, is_play, 0.5, 0.25)
    assert ret.tolist() == [3, 3, 4, 4, 6, 8, 8]


# ------------------------------------------------------------ properties


@st.composite
def meta_episodes(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    num_episodes = draw(st.integers(1, 4))
    reward = st.sampled_from([-10.0, -1.0, -0.1, 0.0, 0.5, 1.0, 5.0, 10.0])
    episodes = [draw(st.lists(reward, min_size=1, max_size=5)) for _ in range(num_episodes)]
    return layout(*episodes)


@given(meta_episodes())
@settings(max_examples=200, deadline=None)
def test_differential_rewards_telescope_to_last_episode(steps: tuple[np.ndarray, ...]) -> None:
    rewards, episode, is_play = steps
    placed = place_rewards("differential", rewards, episode, is_play)
    totals = episode_returns(rewards, episode, is_play)
    assert placed.sum() == pytest.approx(totals[-1], abs=1e-9)
    assert np.all(placed[~is_play] == 0)
    # at most one nonzero per episode, on its last play step
    last = [np.flatnonzero(is_play & (episode == k))[-1] for k in range(len(totals))]
    others = np.ones(len(placed), dtype=bool)
    others[last] = False
    assert np.all(placed[others] == 0)


@given(meta_episodes(), st.sampled_from(list(VARIANTS)), st.floats(0, 1), st.floats(0, 1))
@settings(max_examples=200, deadline=None)
def test_step_returns_equal_closed_form(steps: tuple[np.ndarray, ...], variant: str, g_step: float,
                                        g_traj: float) -> None:
    # ret_t = sum over later play steps s of r_s * g_step^(within moves) * g_traj^(boundaries)
    # LaMer's published formula: the same sum with g_step counted from the first play step of the
    # reward's own episode (each later episode's return from its start), g_traj per boundary.
    rewards, episode, is_play = steps
    cross = variant != "single_episode"
    placed = place_rewards(variant, rewards, episode, is_play)
    ret = meta_episode_returns(variant, rewards, episode, is_play, g_step, g_traj)
    if variant == "final":  # undiscounted whatever the gammas
        g_step = g_traj = 1.0
    plays = np.flatnonzero(is_play)
    for t in range(len(rewards)):
        start = plays[plays >= t][0]  # a reflect step takes its episode's first play step
        total = 0.0
        for position, s in enumerate(plays[plays >= start]):
            boundaries = int(episode[s] - episode[start])
            if boundaries and not cross:
                break
            if variant == "lamer" and boundaries:
                moves = int(np.sum(plays[plays < s] >= np.flatnonzero(is_play & (episode == episode[s]))[0]))
            else:
                moves = position - boundaries
            total += placed[s] * g_step**moves * g_traj**boundaries
        assert ret[t] == pytest.approx(total, abs=1e-9)


# ------------------------------------------------------------ validation


def test_bad_variant_lists_the_valid_ones() -> None:
    rewards, episode, is_play = SMALL
    with pytest.raises(ValueError, match="differential, cumulative, single_episode, final, lamer"):
        place_rewards("lamer_style", rewards, episode, is_play)
    with pytest.raises(ValueError, match="differential, cumulative, single_episode"):
        meta_episode_returns("mage", rewards, episode, is_play, 0.9, 0.6)


@pytest.mark.parametrize(
    ("rewards", "episode", "is_play", "match"),
    [
        ([0.0, 1.0], [0, 0, 0], [True, True], "same length"),
        ([[0.0, 1.0]], [0, 0], [True, True], "1-D"),
        ([0.0, 1.0], [1, 1], [True, True], "start at 0"),
        ([0.0, 1.0], [0, 2], [True, True], "contiguous"),
        ([0.0, 1.0, 0.0], [0, 1, 0], [True, True, True], "contiguous"),
        ([0.0, 0.0, 1.0], [0, 0, 0], [False, True, True], "episode 0"),
        ([1.0, 0.0], [0, 0], [True, False], "reflect step after"),
        ([1.0, 0.0], [0, 1], [True, False], "episode 1 has no play step"),
        ([1.0, 2.0, 3.0], [0, 1, 1], [True, False, True], "reflect steps must be 0"),
        ([1.0, np.nan], [0, 0], [True, True], "finite"),
        ([1.0], [0.5], [True], "integer"),
        ([], [], [], "at least one step"),
    ],
)
def test_invalid_steps_are_rejected(rewards: list, episode: list, is_play: list, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        meta_episode_returns("cumulative", np.array(rewards), np.array(episode), np.array(is_play), 0.9, 0.6)


@pytest.mark.parametrize(("gamma_step", "gamma_traj", "name"), [(1.5, 0.6, "gamma_step"), (0.9, -0.1, "gamma_traj")])
def test_gammas_out_of_range(gamma_step: float, gamma_traj: float, name: str) -> None:
    rewards, episode, is_play = SMALL
    with pytest.raises(ValueError, match=name):
        step_returns(rewards, episode, is_play, gamma_step, gamma_traj)


@pytest.mark.parametrize("variant", ["differential", "cumulative", "single_episode", "final", "lamer"])
def test_batch_returns_equal_the_per_meta_episode_returns(variant: str) -> None:
    # Equivalence: the vectorised sweep over a padded batch against meta_episode_returns
    # and episode_returns row by row, on random meta-episodes of every structure
    # (reflect steps or not, early stops, one to five episodes).
    from mage_core.algos.returns import batch_returns, episode_returns, meta_episode_returns

    rng = np.random.default_rng(3)
    rows = []
    for _ in range(60):
        episodes, plays = [], []
        for k in range(int(rng.integers(1, 6))):
            if k > 0 and rng.random() < 0.5:
                episodes.append(k)
                plays.append(False)
            for _ in range(int(rng.integers(1, 4))):
                episodes.append(k)
                plays.append(True)
        play = np.array(plays)
        rewards = np.where(play, rng.integers(-10, 11, len(plays)).astype(float), 0.0)
        rows.append((rewards, np.array(episodes), play))
    width = max(len(r[0]) for r in rows)
    shape = (len(rows), width)
    rewards, episode = np.zeros(shape), np.zeros(shape, dtype=int)
    play, valid = np.zeros(shape, dtype=bool), np.zeros(shape, dtype=bool)
    for m, (r, e, p) in enumerate(rows):
        n = len(r)
        rewards[m, :n], episode[m, :n], play[m, :n], valid[m, :n] = r, e, p, True
    returns, totals = batch_returns(variant, rewards, episode, play, valid, 0.95, 0.6)
    for m, (r, e, p) in enumerate(rows):
        n = len(r)
        np.testing.assert_allclose(returns[m, :n], meta_episode_returns(variant, r, e, p, 0.95, 0.6), atol=1e-12)
        assert np.all(returns[m, n:] == 0)
        expected = episode_returns(r, e, p)
        np.testing.assert_allclose(totals[m, : len(expected)], expected)
        assert np.all(totals[m, len(expected):] == 0)


def test_batch_returns_reproduce_the_method_reference_check_and_reject_bad_rows() -> None:
    # docs/method.md section 4's reference case (lose in 3, reflect, draw in 4, reflect, win in 3), padded.
    from mage_core.algos.returns import batch_returns

    rewards = np.array([[0, 0, -10, 0, 0, 0, 0, 0, 0, 0, 0, 10, 0]], dtype=float)
    episode = np.array([[0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 2, 0]])
    play = np.array([[1, 1, 1, 0, 1, 1, 1, 1, 0, 1, 1, 1, 0]], dtype=bool)
    valid = np.ones_like(play)
    valid[0, -1] = False
    returns, totals = batch_returns("differential", rewards, episode, play, valid, 0.95, 0.6)
    expected = [-1.868, -1.967, -2.070, 13.216, 13.216, 13.912, 14.644, 15.415, 9.025, 9.025, 9.5, 10.0, 0.0]
    np.testing.assert_allclose(returns[0].round(3), expected)
    np.testing.assert_allclose(totals[0], [-10, 0, 10])
    with pytest.raises(ValueError, match="contiguous"):
        batch_returns("differential", rewards, np.array([[0, 0, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2]]), play, valid,
                      0.95, 0.6)
    with pytest.raises(ValueError, match="one shape"):
        batch_returns("differential", rewards, episode[:, :3], play, valid, 0.95, 0.6)


def test_final_variant_gives_every_step_the_last_episodes_reward_undiscounted() -> None:
    # docs/method.md section 4's reference meta-episode (R = -10, 0, +10): every step's
    # return is R_2 = 10, whatever the gammas; an early stop after episode 1 gives R_1.
    from mage_core.algos.returns import batch_returns

    rewards = np.array([0, 0, -10, 0, 0, 0, 0, 0, 0, 0, 0, 10], dtype=float)
    episode = np.array([0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 2])
    play = np.array([1, 1, 1, 0, 1, 1, 1, 1, 0, 1, 1, 1], dtype=bool)
    np.testing.assert_array_equal(meta_episode_returns("final", rewards, episode, play, 0.95, 0.6), [10.0] * 12)
    stopped = np.s_[:8]
    np.testing.assert_array_equal(
        meta_episode_returns("final", rewards[stopped], episode[stopped], play[stopped], 0.5, 0.5), [0.0] * 8)
    returns, _ = batch_returns("final", rewards[None], episode[None], play[None], np.ones((1, 12), bool), 0.95, 0.6)
    np.testing.assert_array_equal(returns[0], [10.0] * 12)
