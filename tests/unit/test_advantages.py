"""GRPO and GiGPO advantages and their keys against hand-computed values (docs/method.md section 5)."""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mage_core.algos.advantages import (
    REFLECTION_ANCHOR,
    anchor_key,
    gigpo_advantages,
    grpo_advantages,
    group_key,
)

pytestmark = pytest.mark.unit

EPS = 1e-6


# ------------------------------------------------------------ GRPO


def test_grpo_two_interleaved_groups() -> None:
    # group "a": 1, 2, 3 -> mean 2, sample std 1; group "b": 10, 4, 10, 4 -> mean 7,
    # sample std sqrt(36 / 3) = sqrt(12).
    scores = np.array([1.0, 10.0, 2.0, 4.0, 3.0, 10.0, 4.0])
    keys = ["a", "b", "a", "b", "a", "b", "b"]
    s12 = math.sqrt(12.0)
    expected = [-1 / (1 + EPS), 3 / (s12 + EPS), 0.0, -3 / (s12 + EPS), 1 / (1 + EPS), 3 / (s12 + EPS),
                -3 / (s12 + EPS)]
    assert grpo_advantages(scores, keys) == pytest.approx(expected, abs=1e-12)
    # Dr. GRPO: no std division
    assert grpo_advantages(scores, keys, normalize_std=False).tolist() == [-1, 3, 0, -3, 1, 3, -3]
    # population std (ddof=0): a -> sqrt(2/3), b -> 3
    pop = grpo_advantages(scores, keys, ddof=0)
    assert pop[0] == pytest.approx(-1 / (math.sqrt(2 / 3) + EPS), abs=1e-12)
    assert pop[1] == pytest.approx(3 / (3 + EPS), abs=1e-12)


def test_grpo_singleton_and_constant_groups_give_zero() -> None:
    adv = grpo_advantages(np.array([5.0, 7.0, 7.0, -3.0]), [("s", 1), ("s", 2), ("s", 2), ("s", 3)])
    assert adv.tolist() == [0.0, 0.0, 0.0, 0.0]


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(-20, 20)), min_size=1, max_size=30))
@settings(max_examples=200, deadline=None)
def test_grpo_matches_a_per_group_loop(pairs: list[tuple[int, int]]) -> None:
    keys = [k for k, _ in pairs]
    scores = np.array([float(s) for _, s in pairs])
    members: dict[int, list[float]] = defaultdict(list)
    for k, s in pairs:
        members[k].append(float(s))
    expected = []
    for k, s in pairs:
        group = np.array(members[k])
        expected.append(0.0 if len(group) == 1 else (s - group.mean()) / (group.std(ddof=1) + EPS))
    assert grpo_advantages(scores, keys) == pytest.approx(expected, abs=1e-9)


# ------------------------------------------------------------ GiGPO episode term


def test_gigpo_episode_term_mean_norm_vs_mean_std_norm() -> None:
    # One group, scores 10, -10, 0, 0 (mean 0, sample std sqrt(200/3)); all returns equal,
    # distinct anchors -> the step term is 0 and the advantage is the episode term.
    scores = np.array([10.0, -10.0, 0.0, 0.0])
    returns = np.zeros(4)
    groups = [("seed", "mcts", 0)] * 4
    anchors = ["s0", "s1", "s2", "s3"]
    plain = gigpo_advantages(scores, returns, groups, anchors, episode_norm="mean_norm")
    assert plain.episode_term.tolist() == [10, -10, 0, 0]
    assert plain.advantage.tolist() == [10, -10, 0, 0]
    std = math.sqrt(200 / 3)
    scaled = gigpo_advantages(scores, returns, groups, anchors, episode_norm="mean_std_norm")
    assert scaled.episode_term == pytest.approx([10 / (std + EPS), -10 / (std + EPS), 0, 0], abs=1e-12)
    assert scaled.episode_term[0] == pytest.approx(1.2247449, abs=1e-6)  # sqrt(3/2)


def test_gigpo_episode_term_mean_is_over_all_samples_of_the_group() -> None:
    # Reflect samples (score 0) count in their group's mean: mean of (6, 0, 3, 3) = 3.
    scores = np.array([6.0, 0.0, 3.0, 3.0])
    out = gigpo_advantages(scores, np.zeros(4), ["g"] * 4, ["a", REFLECTION_ANCHOR, "b", "c"])
    assert out.episode_term.tolist() == [3, -3, 0, 0]


# ------------------------------------------------------------ GiGPO step term


def test_gigpo_step_term_clusters_with_a_singleton() -> None:
    # One group; anchors a, a, b, b, b, c; returns 4, 2 | 1, 2, 6 | 7.
    # a: mean 3 -> (1, -1); b: mean 3 -> (-2, -1, 3); c: singleton -> 0.
    returns = np.array([4.0, 2.0, 1.0, 2.0, 6.0, 7.0])
    scores = np.array([1.0, 1.0, 1.0, 1.0, 1.0, 7.0])  # mean 2 -> episode term (-1, ..., -1, 5)
    anchors = ["a", "a", "b", "b", "b", "c"]
    out = gigpo_advantages(scores, returns, ["g"] * 6, anchors, step_weight=0.5)
    assert out.step_term.tolist() == [1, -1, -2, -1, 3, 0]
    assert out.episode_term.tolist() == [-1, -1, -1, -1, -1, 5]
    assert out.advantage.tolist() == [-0.5, -1.5, -2, -1.5, 0.5, 5]
    # mean_std_norm scales the step term too (verl-agent step_norm_reward):
    # a: sample std sqrt(2); b: sqrt(14 / 2) = sqrt(7); c stays 0.
    scaled = gigpo_advantages(scores, returns, ["g"] * 6, anchors, episode_norm="mean_std_norm")
    r2, r7 = math.sqrt(2), math.sqrt(7)
    assert scaled.step_term == pytest.approx(
        [1 / (r2 + EPS), -1 / (r2 + EPS), -2 / (r7 + EPS), -1 / (r7 + EPS), 3 / (r7 + EPS), 0], abs=1e-12)


def test_gigpo_step_clusters_do_not_cross_groups() -> None:
    # Same anchor text in two groups: two clusters of two, not one of four.
    returns = np.array([1.0, 3.0, 10.0, 30.0])
    out = gigpo_advantages(np.zeros(4), returns, ["g1", "g1", "g2", "g2"], ["x"] * 4)
    assert out.step_term.tolist() == [-1, 1, -10, 10]


def test_global_vs_local_anchor() -> None:
    # The same board in episodes 0 and 1 (returns 1 and 3) and a reflection before episode 1.
    obs = ["board A", "board A", REFLECTION_ANCHOR, "board B"]
    episode = [0, 1, 1, 1]
    returns = np.array([1.0, 3.0, 5.0, 4.0])
    groups = [group_key(7, "mcts", 0)] * 4
    global_keys = [anchor_key(o, k, "mcts") for o, k in zip(obs, episode)]
    local_keys = [anchor_key(o, k, "mcts", global_anchor=False) for o, k in zip(obs, episode)]
    assert global_keys[0] == global_keys[1] and local_keys[0] != local_keys[1]
    assert gigpo_advantages(np.zeros(4), returns, groups, global_keys).step_term.tolist() == [-1, 1, 0, 0]
    assert gigpo_advantages(np.zeros(4), returns, groups, local_keys).step_term.tolist() == [0, 0, 0, 0]


# ------------------------------------------------------------ grouping


def test_stationary_vs_non_stationary_grouping() -> None:
    # Task seed 3; opponent X scores 10, 0; opponent Y scores -10, -20 (same seat).
    opponents = ["X", "X", "Y", "Y"]
    scores = np.array([10.0, 0.0, -10.0, -20.0])
    stationary = [group_key(3, o, 1) for o in opponents]
    mixed = [group_key(3, o, 1, grouping="non_stationary") for o in opponents]
    # per opponent: X mean 5, Y mean -15
    assert grpo_advantages(scores, stationary, normalize_std=False).tolist() == [5, -5, 5, -5]
    # one mixed group: mean -5
    assert grpo_advantages(scores, mixed, normalize_std=False).tolist() == [15, 5, -5, -15]
    out = gigpo_advantages(scores, np.zeros(4), mixed, ["s"] * 4)
    assert out.episode_term.tolist() == [15, 5, -5, -15]


def test_batch_scope_drops_the_task_seed() -> None:
    # Batch scope, stationary: one group per (opponent, seat) whatever the task seed.
    assert group_key(1, "X", 0, scope="batch") == group_key(2, "X", 0, scope="batch") == ("X", 0)
    assert group_key(1, "X", 0, scope="batch") != group_key(1, "X", 1, scope="batch")
    assert group_key(1, "X", 0, scope="batch") != group_key(1, "Y", 0, scope="batch")
    # Batch scope, non-stationary: the whole batch is one group.
    assert group_key(1, "X", 0, "non_stationary", "batch") == group_key(2, "Y", 1, "non_stationary", "batch") == ()
    # seeds 1, 2 vs X (scores 4, 0) and seeds 3, 4 vs Y (scores -2, -6): means 2 and -4
    keys = [group_key(s, o, 0, scope="batch") for s, o in [(1, "X"), (2, "X"), (3, "Y"), (4, "Y")]]
    assert grpo_advantages(np.array([4.0, 0.0, -2.0, -6.0]), keys, normalize_std=False).tolist() == [2, -2, 2, -2]
    with pytest.raises(ValueError, match="unknown grouping 'opponents'; choose one of stationary"):
        group_key(1, "X", 0, grouping="opponents")
    with pytest.raises(ValueError, match="unknown group scope 'all'; choose one of task, batch"):
        group_key(1, "X", 0, scope="all")


def test_agent_specific_normalization_separates_opponents_and_seats() -> None:
    # Two opponents and two seats on one task seed: four groups; the same opening board
    # against different opponents never shares a cluster.
    assert group_key(11, "aggressive", 0) != group_key(11, "conservative", 0)
    assert group_key(11, "aggressive", 0) != group_key(11, "aggressive", 1)
    assert group_key(11, "aggressive", 0) == group_key(11, "aggressive", 0)
    assert (group_key(11, "aggressive", 0, grouping="non_stationary")
            == group_key(11, "conservative", 1, grouping="non_stationary"))
    opponents = ["aggressive", "aggressive", "conservative", "conservative"]
    scores = np.array([5.0, -5.0, 10.0, 0.0])
    returns = np.array([2.0, 0.0, 8.0, 4.0])
    groups = [group_key(11, o, 0) for o in opponents]
    anchors = [anchor_key("J | no bet yet", 0, o) for o in opponents]
    out = gigpo_advantages(scores, returns, groups, anchors)
    assert out.episode_term.tolist() == [5, -5, 5, -5]  # means 0 and 5
    assert out.step_term.tolist() == [1, -1, 2, -2]  # means 1 and 6
    # Non-stationary grouping: mixed group (mean 2.5); anchors with the opponent still split
    # the clusters, anchors without it (grouping="non_stationary") mix them (mean 3.5).
    mixed = [group_key(11, o, 0, grouping="non_stationary") for o in opponents]
    out = gigpo_advantages(scores, returns, mixed, anchors)
    assert out.episode_term.tolist() == [2.5, -7.5, 7.5, -2.5]
    assert out.step_term.tolist() == [1, -1, 2, -2]
    mixed_anchors = [anchor_key("J | no bet yet", 0, o, stationary=False) for o in opponents]
    out = gigpo_advantages(scores, returns, mixed, mixed_anchors)
    assert out.step_term.tolist() == [-1.5, -3.5, 4.5, 0.5]


def test_outputs_have_one_entry_per_sample_no_padding() -> None:
    # Uneven group sizes (3 and 1) stay uneven: nothing is padded or duplicated.
    out = gigpo_advantages(np.array([1.0, 2.0, 3.0, 9.0]), np.arange(4.0), ["a", "a", "a", "b"], ["x"] * 4)
    assert out.advantage.shape == (4,)
    assert out.episode_term.tolist() == [-1, 0, 1, 0]
    assert out.step_term.tolist() == [-1, 0, 1, 0]


# ------------------------------------------------------------ validation


def test_length_mismatches_are_rejected() -> None:
    with pytest.raises(ValueError, match="group_keys"):
        grpo_advantages(np.array([1.0, 2.0]), ["a"])
    with pytest.raises(ValueError, match="returns"):
        gigpo_advantages(np.array([1.0, 2.0]), np.array([1.0]), ["a", "a"], ["x", "x"])
    with pytest.raises(ValueError, match="group_keys"):
        gigpo_advantages(np.array([1.0, 2.0]), np.array([1.0, 2.0]), ["a"], ["x", "x"])
    with pytest.raises(ValueError, match="anchor_keys"):
        gigpo_advantages(np.array([1.0, 2.0]), np.array([1.0, 2.0]), ["a", "a"], ["x", "x", "x"])


def test_other_bad_inputs_are_rejected() -> None:
    with pytest.raises(ValueError, match="mean_norm, mean_std_norm"):
        gigpo_advantages(np.ones(2), np.ones(2), ["a", "a"], ["x", "x"], episode_norm="std")
    with pytest.raises(ValueError, match="empty"):
        grpo_advantages(np.array([]), [])
    with pytest.raises(ValueError, match="not hashable"):
        grpo_advantages(np.ones(2), [["a"], ["a"]])
    with pytest.raises(ValueError, match="finite"):
        grpo_advantages(np.array([1.0, np.inf]), ["a", "a"])
    with pytest.raises(ValueError, match="eps"):
        grpo_advantages(np.ones(2), ["a", "a"], eps=0.0)
    with pytest.raises(ValueError, match="observation"):
        anchor_key(None, 0, "mcts")  # type: ignore[arg-type]
