"""benchmarks/learn_kuhn.py: "final beats first" from the paired per-meta-episode
differences with a 95% interval (checked against numbers worked out by hand), and
the refusal of a report set that is the selection set."""

from __future__ import annotations

import importlib.util
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "learn_kuhn.py"
Z = 1.959963984540054


def _script():
    spec = importlib.util.spec_from_file_location("learn_kuhn", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


learn_kuhn = _script()


def rows(opponent: str, seat: str, start: int, hands: list[list[float]]) -> list[dict]:
    """Trial rows of meta-episodes ``start``, ``start + 1``, ... with these per-hand chips."""
    return [{"opponent": opponent, "seat": seat, "meta_episode": start + i, "episode": e + 1, "score": chips}
            for i, scores in enumerate(hands) for e, chips in enumerate(scores)]


# Pair a (agent first): final minus first = 1, 0, 2 -> mean 1, sample variance 1, n 3.
A = rows("a", "first", 0, [[0, 0.5, 1], [1, -1, 1], [-1, 0, 1]])
# Pair b (agent second): 2, -2, 0, 4; meta-episode 4 stopped after hand 2 (-1 counts as its final hand)
# -> mean 1, sample variance 20/3, n 4.
B = rows("b", "second", 3, [[-1, 0, 1], [1, -1], [0, 2, 0], [-2, 0, 2]])


def test_the_weighted_paired_difference_combines_the_pairs_variances_by_squared_weights() -> None:
    mean, low, high = learn_kuhn.paired_difference(A + B, 3, {("a", 0): 0.25, ("b", 1): 0.75})
    # 0.25 * 1 + 0.75 * 1; variance 0.25^2 * 1/3 + 0.75^2 * (20/3)/4 = 1/48 + 45/48 = 23/24.
    assert mean == pytest.approx(1.0)
    assert (low, high) == pytest.approx((1 - Z * math.sqrt(23 / 24), 1 + Z * math.sqrt(23 / 24)))
    assert learn_kuhn.beats_verdict(low, high).startswith("not shown")  # the interval holds 0
    # Weights are normalised over the pairs present (here 1 and 3 -> 0.25 and 0.75 again).
    assert learn_kuhn.paired_difference(A + B, 3, {("a", 0): 1.0, ("b", 1): 3.0}) == pytest.approx((mean, low, high))


def test_without_weights_every_meta_episode_counts_once() -> None:
    # 1, 0, 2, 2, -2, 0, 4: mean 1, sample variance 22/6, n 7.
    mean, low, high = learn_kuhn.paired_difference(A + B, 3)
    assert (mean, low, high) == pytest.approx((1.0, 1 - Z * math.sqrt(22 / 6 / 7), 1 + Z * math.sqrt(22 / 6 / 7)))


def test_yes_only_when_the_interval_is_above_zero_and_no_when_it_is_below() -> None:
    # 1, 1, 2, 2: mean 1.5, sample variance 1/3, n 4 -> half-width Z * sqrt(1/12) = 0.566.
    better = rows("a", "first", 0, [[0, 0, 1], [0, 0, 1], [0, 0, 2], [-1, 0, 1]])
    mean, low, high = learn_kuhn.paired_difference(better, 3, {("a", 0): 1.0})
    assert (mean, low, high) == pytest.approx((1.5, 1.5 - Z * math.sqrt(1 / 12), 1.5 + Z * math.sqrt(1 / 12)))
    assert learn_kuhn.beats_verdict(low, high).startswith("yes")
    worse = [{**row, "score": -row["score"]} for row in better]
    assert learn_kuhn.beats_verdict(*learn_kuhn.paired_difference(worse, 3, {("a", 0): 1.0})[1:]).startswith("no:")
    # A final hand above the first on average is not enough: 3, -2 has mean 0.5 but an interval holding 0.
    noisy = rows("a", "first", 0, [[0, 0, 3], [2, 0, 0]])
    mean, low, high = learn_kuhn.paired_difference(noisy, 3)
    assert mean == pytest.approx(0.5) and low < 0 < high
    assert learn_kuhn.beats_verdict(low, high).startswith("not shown")


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        learn_kuhn.paired_difference(rows("a", "first", 0, [[0, 0, 1]]), 3)
    with pytest.raises(ValueError, match="without a weight"):
        learn_kuhn.paired_difference(A + B, 3, {("a", 0): 1.0})


@pytest.mark.parametrize("flags, message", [
    (["--report-seed", "20261124"], "--report-seed 20261124 is evaluation.selection_seed"),
    (["--set", "evaluation.selection_seed=5", "--report-seed", "5"], "--report-seed 5 is evaluation.selection_seed"),
    (["--per-pair", "1"], "--per-pair 1: at least 2"),
])
def test_the_script_refuses_a_report_set_that_picked_the_policy_before_training(
        tmp_path: Path, flags: list[str], message: str) -> None:
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out), "--minutes", "0.01", *flags],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("learn_kuhn.py: ") and message in lines[0]
    assert not out.exists()  # nothing trained or written
