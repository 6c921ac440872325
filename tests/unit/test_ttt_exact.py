"""Tic-Tac-Toe best responses (`mage ttt analyze`): values checked against an
independent exact recursion, known facts of the game, and play."""

from __future__ import annotations

import json
from fractions import Fraction
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from mage_core.envs.tic_tac_toe.rules import TicTacToeState
from mage_core.envs.tic_tac_toe.best_response import MoveDistributions, best_response, play
from mage_core.opponents.patterns import PATTERNS
from mage_core.opponents.registry import make_opponent
from mage_core.stages import analyze

pytestmark = pytest.mark.unit

LINES = [(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6)]


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


@lru_cache(maxsize=None)
def exact_vs_random(board: str, agent: str) -> tuple[Fraction, Fraction]:
    """(P(win), P(loss)) of the most-wins agent against uniform random, written
    from scratch on strings of 'X', 'O', '.': no code of the project."""
    for a, b, c in LINES:
        if board[a] != "." and board[a] == board[b] == board[c]:
            return (Fraction(1), Fraction(0)) if board[a] == agent else (Fraction(0), Fraction(1))
    empty = [i for i, ch in enumerate(board) if ch == "."]
    if not empty:
        return Fraction(0), Fraction(0)
    mover = "X" if board.count("X") == board.count("O") else "O"
    children = [exact_vs_random(board[:i] + mover + board[i + 1:], agent) for i in empty]
    if mover == agent:
        return max(children, key=lambda wl: (wl[0], -wl[1]))
    n = len(children)
    return sum((w for w, _ in children), Fraction(0)) / n, sum((lo for _, lo in children), Fraction(0)) / n


@pytest.mark.parametrize("seat", [0, 1])
def test_best_response_to_uniform_random_equals_an_independent_exact_recursion(seat: int) -> None:
    opponent = make_opponent("tic_tac_toe", "random")
    response = best_response(MoveDistributions(opponent, 1, rng()), seat, "win")
    win, loss = exact_vs_random("." * 9, "XO"[seat])
    assert response.value[0] == pytest.approx(float(win), abs=1e-12)
    assert response.value[2] == pytest.approx(float(loss), abs=1e-12)
    assert sum(response.value) == pytest.approx(1.0)


@pytest.mark.parametrize("pattern", sorted(PATTERNS))
@pytest.mark.parametrize("seat", [0, 1])
def test_every_pattern_player_is_a_forced_win_in_either_seat(pattern: str, seat: int) -> None:
    # docs/method.md section 11: a best-responding learner beats each pattern player.
    opponent = make_opponent("tic_tac_toe", f"pattern-{pattern}")
    response = best_response(MoveDistributions(opponent, 1, rng()), seat, "win")
    assert response.value == (1.0, 0.0, 0.0)
    assert play(response, opponent, 3, rng()).wins == 3


@pytest.mark.parametrize("seat", [0, 1])
def test_perfect_play_is_a_draw(seat: int) -> None:
    # Against minimax (random tie-break) the best an agent can do is draw, and it can always draw.
    opponent = make_opponent("tic_tac_toe", "minimax")
    response = best_response(MoveDistributions(opponent, 20, rng()), seat, "win")
    assert response.value == pytest.approx((0.0, 1.0, 0.0))
    played = play(response, opponent, 50, rng(1))
    assert (played.wins, played.losses) == (0, 0)


@pytest.mark.parametrize("seat", [0, 1])
def test_never_lose_policy_never_loses_against_mcts(seat: int) -> None:
    # The safe objective plays only game-theoretically optimal moves, so no
    # opponent can beat it, however poorly its distribution was estimated (3
    # searches per position here); moves outside the sampled support are
    # searched when they are met.
    opponent = make_opponent("tic_tac_toe", "mcts-100")
    distributions = MoveDistributions(opponent, 3, rng())
    response = best_response(distributions, seat, "safe")
    assert response.value[2] == 0.0
    played = play(response, opponent, 100, rng(2))
    assert played.losses == 0
    assert not distributions.exact and distributions.positions > 0


def test_estimated_distribution_is_a_probability_distribution_over_legal_moves() -> None:
    opponent = make_opponent("tic_tac_toe", "mcts-100")
    distributions = MoveDistributions(opponent, 40, rng())
    state = TicTacToeState((1, 0, 0, 0, 2, 0, 0, 0, 1))  # X corners, O centre: O to move
    dist = distributions(state)
    assert set(dist) <= set(state.legal_moves())
    assert sum(dist.values()) == pytest.approx(1.0)
    assert all(c * 40 == pytest.approx(round(c * 40)) for c in dist.values())
    assert distributions(state) is dist  # cached per position


def test_best_response_takes_an_immediate_win_and_blocks_one() -> None:
    opponent = make_opponent("tic_tac_toe", "random")
    response = best_response(MoveDistributions(opponent, 1, rng()), 0, "win")
    # X on 0 and 1, O on 3 and 4: X to move wins at 2 (not blocking at 5).
    assert response.act(TicTacToeState((1, 1, 0, 2, 2, 0, 0, 0, 0))) == 2
    safe = best_response(MoveDistributions(opponent, 1, rng()), 0, "safe")
    # X on 0 and 8, O on 3 and 4 threatens 5: X must block at 5 (no win available).
    assert safe.act(TicTacToeState((1, 0, 0, 2, 2, 0, 0, 0, 1))) == 5


def test_bad_input_is_refused() -> None:
    opponent = make_opponent("tic_tac_toe", "random")
    with pytest.raises(ValueError, match="samples"):
        MoveDistributions(opponent, 0, rng())
    with pytest.raises(TypeError, match="act"):
        MoveDistributions(object(), 1, rng())
    with pytest.raises(ValueError, match="agent_seat"):
        best_response(MoveDistributions(opponent, 1, rng()), 2)
    with pytest.raises(ValueError, match="objective"):
        best_response(MoveDistributions(opponent, 1, rng()), 0, "draw")  # type: ignore[arg-type]
    response = best_response(MoveDistributions(opponent, 1, rng()), 0)
    with pytest.raises(ValueError, match="not the agent"):
        response.act(TicTacToeState((1, 0, 0, 0, 0, 0, 0, 0, 0)))
    with pytest.raises(ValueError, match="games"):
        play(response, opponent, 0, rng())


def test_analyze_command_writes_the_population_ceiling(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "ttt.json"
    params = Path(__file__).resolve().parents[2] / "params.yaml"
    assert analyze.run("tic_tac_toe", str(params), opponents=["pattern-corners", "random"], games=200, out=str(out)) == 0
    figures = json.loads(out.read_text())
    assert figures["opponents"]["pattern-corners"]["0"]["win"]["played"]["win"] == 1.0
    # Equal weights over the two opponents and both seats: the mean of the four played win rates.
    played = [figures["opponents"][n][s]["win"]["played"]["win"] for n in ("pattern-corners", "random")
              for s in ("0", "1")]
    assert figures["population"]["all (weighted)"]["win_win"] == pytest.approx(sum(played) / 4)
    assert figures["population"]["all (weighted)"]["safe_loss"] == 0.0
    assert "Population" in capsys.readouterr().out


def test_analyze_command_refuses_bad_arguments() -> None:
    from mage_core.config import ConfigError

    params = Path(__file__).resolve().parents[2] / "params.yaml"
    with pytest.raises(ConfigError, match="--samples"):
        analyze.run("tic_tac_toe", str(params), samples=0)
    with pytest.raises(ConfigError, match="--opponent"):
        analyze.run("tic_tac_toe", str(params), opponents=["mcts-x"])
