"""Confidence intervals and reward penalties against hand-computed values."""

from __future__ import annotations

import pytest

from mage_core.envs.rewards import invalid_action_penalty, length_penalty
from mage_core.evaluation.stats import mean_interval, wilson_interval

pytestmark = pytest.mark.unit


def test_wilson_interval_hand_computed() -> None:
    # 5/10 at z=1.96: centre 0.5, half-width 1.96*sqrt(0.025+0.0096040)/1.384146 = 0.263399
    low, high = wilson_interval(5, 10)
    assert low == pytest.approx(0.236593, abs=1e-5)
    assert high == pytest.approx(0.763407, abs=1e-5)
    # 0 of 20: the lower bound is 0 and the upper z^2/(n+z^2) = 3.841459/23.841459
    low, high = wilson_interval(0, 20)
    assert low == 0.0
    assert high == pytest.approx(3.841459 / 23.841459, abs=1e-6)


def test_wilson_rejects_impossible_counts() -> None:
    with pytest.raises(ValueError):
        wilson_interval(3, 2)
    with pytest.raises(ValueError):
        wilson_interval(0, 0)


def test_mean_interval_hand_computed() -> None:
    mean, low, high = mean_interval([1.0, -1.0, 1.0, -1.0])
    # sample variance 4/3, standard error sqrt(1/3) = 0.57735, half-width 1.131607
    assert mean == 0.0
    assert high == pytest.approx(1.959964 * 0.5773503, abs=1e-5)
    assert low == pytest.approx(-high)


@pytest.mark.parametrize(
    ("tokens", "expected"),
    [(0, 0.0), (1536, 0.0), (2304, 1.0), (3072, 2.0), (5000, 2.0), (1537, 2.0 / 1536)],
)
def test_length_penalty_paper_eq13(tokens: int, expected: float) -> None:
    # c = 2.0, Lmax = 3072 (Tic-Tac-Toe): zero up to 1536 tokens, linear to 2.0 at 3072.
    assert length_penalty(tokens, 3072, 2.0) == pytest.approx(expected)


def test_length_penalty_rejects_bad_lengths() -> None:
    with pytest.raises(ValueError, match="max_response_tokens"):
        length_penalty(10, 0, 1.0)
    with pytest.raises(ValueError, match="num_response_tokens"):
        length_penalty(-1, 10, 1.0)


def test_invalid_action_penalty() -> None:
    assert invalid_action_penalty(True, 0.5) == 0.5
    assert invalid_action_penalty(False, 0.5) == 0.0


def test_atomic_writes_get_the_mode_of_a_plain_open(tmp_path) -> None:
    import os
    import stat

    from mage_core.io.atomic import write_text_atomic

    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    atomic = write_text_atomic(tmp_path / "atomic.txt", "x")
    assert stat.S_IMODE(os.stat(atomic).st_mode) == stat.S_IMODE(os.stat(plain).st_mode)
