"""Tic-Tac-Toe rules and agent env (docs/method.md sections 2, 3, 10, 11)."""

from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mage_core.envs.base import TERMINAL, Env, GameState, Outcome
from mage_core.envs.tic_tac_toe.env import TicTacToeEnv, cell_to_action, parse_coordinates
from mage_core.envs.tic_tac_toe.params import TicTacToeSettings
from mage_core.envs.tic_tac_toe.rules import TicTacToeState, initial_state, play_moves, reachable_states
from mage_core.opponents.patterns import PatternPlayer
from mage_core.opponents.random_player import UniformRandom

pytestmark = pytest.mark.unit


# -- rules ---------------------------------------------------------------------


def test_reachable_positions_match_the_known_counts():
    states = reachable_states()
    assert len(states) == 5478
    terminal = [s for s in states.values() if s.is_terminal()]
    assert len(terminal) == 958
    # Known breakdown of the 958 terminal positions: X wins / O wins / draws.
    assert Counter(s.winner() for s in terminal) == {0: 626, 1: 316, None: 16}
    # Positions by number of marks (OEIS-known 1, 9, 72, ..., 78).
    by_depth = Counter(9 - s.board.count(0) for s in states.values())
    assert [by_depth[d] for d in range(10)] == [1, 9, 72, 252, 756, 1260, 1520, 1140, 390, 78]


def test_initial_state():
    state = initial_state()
    assert isinstance(state, GameState)
    assert state.to_move == 0
    assert state.legal_moves() == tuple(range(9))
    assert not state.is_terminal()
    assert state.winner() is None
    assert state.key() == (0,) * 9


def test_apply_alternates_players_and_leaves_the_state_unchanged():
    state = initial_state()
    after = state.apply(4)
    assert state.board == (0,) * 9
    assert after.board == (0, 0, 0, 0, 1, 0, 0, 0, 0)
    assert after.to_move == 1
    assert after.apply(0).board[0] == 2
    assert after.apply(0).to_move == 0
    assert after.legal_moves() == (0, 1, 2, 3, 5, 6, 7, 8)
    with pytest.raises(dataclasses.FrozenInstanceError):
        after.board = (0,) * 9  # type: ignore[misc]


@pytest.mark.parametrize("move, fragment", [(4, "already taken"), (9, "0..8"), (-1, "0..8"),
                                            (True, "0..8"), ("4", "0..8")])
def test_illegal_moves_raise_naming_the_move(move, fragment):
    state = initial_state().apply(4)
    with pytest.raises(ValueError, match=fragment) as error:
        state.apply(move)
    assert repr(move) in str(error.value) or str(move) in str(error.value)


def test_a_finished_game_accepts_no_move():
    won = play_moves([0, 3, 1, 4, 2])  # X: top row
    assert won.is_terminal() and won.to_move == TERMINAL
    assert won.legal_moves() == ()
    with pytest.raises(ValueError, match="game is over"):
        won.apply(8)


@pytest.mark.parametrize(
    "moves, winner, returns",
    [
        ([0, 3, 1, 4, 2], 0, (1.0, -1.0)),  # X row 1
        ([1, 0, 3, 4, 5, 8], 1, (-1.0, 1.0)),  # O main diagonal
        ([2, 0, 4, 1, 6], 0, (1.0, -1.0)),  # X anti-diagonal
        ([0, 1, 2, 4, 3, 5, 7, 6, 8], None, (0.0, 0.0)),  # X O X / X O O / O X X
        ([0, 4, 8], None, (0.0, 0.0)),  # unfinished
    ],
)
def test_winner_and_returns(moves, winner, returns):
    state = play_moves(moves)
    assert state.winner() == winner
    assert state.returns() == returns
    assert state.is_terminal() == (len(moves) == 9 or winner is not None)


def test_transpositions_share_one_key():
    a, b = play_moves([0, 4, 8]), play_moves([8, 4, 0])
    assert a == b and hash(a) == hash(b) and a.key() == b.key()
    assert len({a, b, play_moves([0, 4, 2])}) == 2


@pytest.mark.parametrize(
    "board, fragment",
    [((0,) * 8, "tuple of 9"), ((3,) + (0,) * 8, "cells must be"),
     ((2,) + (0,) * 8, "X count"), ((1, 1) + (0,) * 7, "X count"), ([0] * 9, "tuple of 9")],
)
def test_impossible_boards_are_rejected(board, fragment):
    with pytest.raises(ValueError, match=fragment):
        TicTacToeState(board)


# -- actions -------------------------------------------------------------------


def test_action_texts_are_one_based_row_col():
    assert [cell_to_action(c) for c in (0, 2, 5, 8)] == ["(1, 1)", "(1, 3)", "(2, 3)", "(3, 3)"]
    assert all(parse_coordinates(cell_to_action(c)) == c for c in range(9))


@pytest.mark.parametrize("text", ["(2, 3)", "(2,3)", "2, 3", "2,3", "( 2 , 3 )", " [2,3] ",
                                  "(2, 3).", "\n(2,\t3)\n"])
def test_parse_action_accepts_loose_forms(text):
    env = _env(seat=0)
    assert env.parse_action(f"I think... <action>{text}</action>") == "(2, 3)"


@pytest.mark.parametrize(
    "response",
    ["(2, 3)", "<action></action>", "<action>(4, 1)</action>", "<action>(0, 2)</action>",
     "<action>(2 3)</action>", "<action>23</action>", "<action>(2, 3, 1)</action>",
     "<action>(２, ３)</action>", "<action>row 2 col 3</action>", "<action>(12, 3)</action>"],
)
def test_parse_action_rejects_malformed_or_untagged_text(response):
    assert _env(seat=0).parse_action(response) is None


def test_parse_action_rejects_occupied_cells_and_uses_the_last_tag():
    env = _env(seat=1, opponent=PatternPlayer.from_pattern("center_corners_edges"))
    assert env.parse_action("<action>(2, 2)</action>") is None  # the opening took the center
    assert env.parse_action("<action>(2, 2)</action> no: <action>(1,1)</action>") == "(1, 1)"


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_parse_action_never_raises(text):
    env = _env(seat=0)
    for response in (text, f"<action>{text}</action>", f"<action>{text}"):
        result = env.parse_action(response)
        assert result is None or result in env.legal_actions()


# -- env -------------------------------------------------------------------------


def _env(seat: int, opponent=None, settings: TicTacToeSettings | None = None, seed: int = 0):
    opponent = opponent or PatternPlayer.from_pattern("corners")
    env = TicTacToeEnv(settings or TicTacToeSettings(), opponent, seat, np.random.default_rng(seed))
    env.reset()
    return env


def test_env_implements_the_protocol():
    env = _env(seat=0)
    assert isinstance(env, Env)
    assert env.name == "tic_tac_toe"
    assert (env.turn, env.done, env.outcome) == (0, False, None)


def test_observation_as_x_moving_first():
    assert _env(seat=0).observation() == (
        "You play X; the opponent plays O.\n"
        "  1 2 3\n"
        "1 . . .\n"
        "2 . . .\n"
        "3 . . .\n"
        "Your move as X. Legal moves: (1, 1), (1, 2), (1, 3), (2, 1), (2, 2), (2, 3), "
        "(3, 1), (3, 2), (3, 3)"
    )


def test_observation_as_o_after_the_opponent_opens():
    env = _env(seat=1, opponent=PatternPlayer.from_pattern("corners_bottom_right"))
    assert env.moves == (("opponent", "(3, 3)"),)
    assert env.observation() == (
        "You play O; the opponent plays X.\n"
        "  1 2 3\n"
        "1 . . .\n"
        "2 . . .\n"
        "3 . . X\n"
        "Your move as O. Legal moves: (1, 1), (1, 2), (1, 3), (2, 1), (2, 2), (2, 3), "
        "(3, 1), (3, 2)"
    )
    result = env.step("(2, 2)")
    assert result.info == {"agent_move": "(2, 2)", "opponent_move": "(3, 1)"}
    assert env.observation().splitlines()[2:5] == ["1 . . .", "2 . O .", "3 X . X"]


def _play(env: TicTacToeEnv, cells: list[int]):
    return [env.step(cell_to_action(c)) for c in cells]


def test_win_as_x_against_corners_pays_win_reward():
    env = _env(seat=0)  # corners: 0, 2, 6, 8, 4, ...
    results = _play(env, [4, 8, 1, 7])  # O answers 0, 2, 6; X completes column 2
    assert [r.info["opponent_move"] for r in results] == ["(1, 1)", "(1, 3)", "(3, 1)", None]
    assert [r.reward for r in results] == [0.0, 0.0, 0.0, 10.0]
    assert results[-1].done and results[-1].outcome is Outcome.WIN
    assert env.observation().endswith("Game over: you won.")
    assert env.legal_actions() == [] and env.parse_action("<action>(3, 3)</action>") is None


def test_loss_as_x_pays_loss_reward():
    env = _env(seat=0)
    results = _play(env, [1, 5, 7, 8])  # O: 0, 2, 6, then 4 completes 2-4-6
    assert results[-1].info["opponent_move"] == "(2, 2)"
    assert (results[-1].reward, results[-1].outcome) == (-10.0, Outcome.LOSS)
    assert env.observation().endswith("Game over: you lost.")


def test_draw_pays_draw_reward():
    env = _env(seat=0, settings=TicTacToeSettings(draw_reward=1.5))
    results = _play(env, [0, 6, 1, 5, 7])  # O: 2, 8, 4, 3
    assert [r.done for r in results] == [False] * 4 + [True]
    assert (results[-1].reward, results[-1].outcome) == (1.5, Outcome.DRAW)
    assert env.observation().endswith("Game over: draw, the board is full.")


@pytest.mark.parametrize("action", [None, "(2, 2)", "(4, 4)", "garbage"])
def test_invalid_action_costs_a_turn_and_the_opponent_waits(action):
    env = _env(seat=1, opponent=PatternPlayer.from_pattern("center_corners_edges"))
    before = env.state
    result = env.step(action)
    assert (result.reward, result.invalid, result.done, result.outcome) == (0.0, True, False, None)
    assert result.info == {"agent_move": None, "opponent_move": None}
    assert env.state == before and env.turn == 1


def test_timeout_after_an_invalid_turn_pays_the_loss_reward():
    # Stalling rule (docs/rewards.md): the turn limit after an invalid turn pays min(loss_reward, 0).
    env = _env(seat=0, settings=TicTacToeSettings(max_turns=3))
    assert env.legal_return_floor() == -10.0
    results = [env.step(None), env.step("(1, 1)"), env.step(None)]
    assert [r.done for r in results] == [False, False, True]
    assert [r.reward for r in results] == [0.0, 0.0, -10.0]
    assert (results[-1].outcome, env.turn) == (Outcome.TIMEOUT, 3)
    assert env.observation().endswith(
        "Game over: the turn limit of 3 was reached. A game stalled by invalid moves counts as a loss.")
    with pytest.raises(RuntimeError, match="restart"):
        env.step("(2, 2)")
    env.restart()  # the invalid turn of the last episode does not carry over
    results = _play(env, [4, 1, 3])  # corners answers 0, 2, 6; the third turn hits the limit
    assert [(r.reward, r.outcome) for r in results] == [(0.0, None), (0.0, None), (0.0, Outcome.TIMEOUT)]
    assert env.observation().endswith("Game over: the turn limit of 3 was reached.")


def test_stalled_timeout_follows_the_loss_reward_and_never_pays_above_zero():
    mild = _env(seat=1, settings=TicTacToeSettings(max_turns=2, loss_reward=-4.0))
    assert [mild.step(None).reward for _ in range(2)] == [0.0, -4.0]
    # With every outcome positive a legal timeout (0) is the worst legal result.
    positive = _env(seat=0, settings=TicTacToeSettings(max_turns=2, loss_reward=1.0, draw_reward=2.0,
                                                       win_reward=3.0))
    assert positive.legal_return_floor() == 0.0
    assert [positive.step(None).reward for _ in range(2)] == [0.0, 0.0]


def test_default_episode_times_out_after_eight_invalid_turns():
    env = _env(seat=0)
    results = [env.step(None) for _ in range(8)]
    assert [r.done for r in results] == [False] * 7 + [True]
    assert results[-1].outcome is Outcome.TIMEOUT
    assert [r.reward for r in results] == [0.0] * 7 + [-10.0]


def test_restart_reproduces_the_initial_state_with_a_random_opener():
    env = _env(seat=1, opponent=UniformRandom(), seed=3)
    initial_obs, initial_moves = env.observation(), env.moves
    assert len(initial_moves) == 1 and env.state.board.count(1) == 1
    replies = set()
    for _ in range(6):
        env.step(env.legal_actions()[0])
        env.step(None)
        replies.add(env.moves[2:])
        env.restart()
        assert env.observation() == initial_obs and env.moves == initial_moves
        assert (env.turn, env.done) == (0, False)
    assert len(replies) > 1  # the rng keeps running: replies vary across episodes


def test_reset_of_seat_zero_draws_nothing():
    rng = np.random.default_rng(5)
    env = TicTacToeEnv(TicTacToeSettings(), UniformRandom(), 0, rng)
    env.reset()
    assert env.state == initial_state()
    assert rng.random() == np.random.default_rng(5).random()


def test_use_before_reset_and_bad_arguments_raise():
    env = TicTacToeEnv(TicTacToeSettings(), UniformRandom(), 0, np.random.default_rng(0))
    for call in (env.observation, env.restart, lambda: env.step(None)):
        with pytest.raises(RuntimeError, match="before reset"):
            call()
    with pytest.raises(ValueError, match="agent_seat"):
        TicTacToeEnv(TicTacToeSettings(), UniformRandom(), 2, np.random.default_rng(0))
    with pytest.raises(TypeError, match="Generator"):
        TicTacToeEnv(TicTacToeSettings(), UniformRandom(), 0, 7)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs, fragment",
    [({"max_turns": 0}, "max_turns"), ({"max_turns": 2.5}, "max_turns"),
     ({"win_reward": float("nan")}, "win_reward"), ({"win_reward": -20.0}, "loss_reward <="),
     ({"draw_reward": 11.0}, "draw_reward")],
)
def test_settings_validation(kwargs, fragment):
    with pytest.raises(ValueError, match=fragment):
        TicTacToeSettings(**kwargs)
