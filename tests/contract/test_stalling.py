"""Stalling never pays (docs/rewards.md), for every game: an episode that the turn
limit ends after invalid turns returns at most the worst legal outcome.

The worst legal outcome is computed here independently of the envs' rule, from the
rules layer alone: Kuhn Poker by enumerating every deal, seat, archetype and legal
action sequence; Tic-Tac-Toe by exhaustive search of legal play against every
opponent of the balanced population that can be searched exactly (the patterns and
uniform random; MCTS-100's moves are a subset of random's); Sokoban by a search over
(position, turns left, moves made in the turn) of generated and hand-made levels;
WebShop by playing legal timeouts and purchases on a generated catalogue.
The stalled episodes are played through the envs: all turns invalid, and every mix
of legal and invalid turns (Kuhn: all of them; the others: seeded samples).
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np
import pytest

from mage_core.envs.base import Outcome
from mage_core.envs.kuhn_poker.env import KuhnPokerEnv
from mage_core.envs.kuhn_poker.params import KuhnPokerSettings
from mage_core.envs.kuhn_poker.rules import BET, DEALS, MOVE_NAMES, PASS, KuhnState
from mage_core.envs.sokoban.env import SokobanEnv
from mage_core.envs.sokoban.params import SokobanSettings
from mage_core.envs.sokoban.generate import generate_level
from mage_core.envs.sokoban.level import SokobanLevel
from mage_core.envs.sokoban.level import move_state
from mage_core.envs.tic_tac_toe.env import TicTacToeEnv
from mage_core.envs.tic_tac_toe.params import TicTacToeSettings
from mage_core.envs.tic_tac_toe.rules import TicTacToeState, initial_state
from mage_core.opponents.kuhn import ARCHETYPES
from mage_core.opponents.registry import make_opponent
from tests.envcases import OPPONENT_SETTINGS

pytestmark = pytest.mark.contract


def stalled_returns(env, turn_plans, legal_rng: np.random.Generator):
    """Play one episode per plan (``True`` = a random legal action, ``False`` =
    invalid); yield the task-reward total of every episode the turn limit ended
    after at least one invalid turn."""
    for plan in turn_plans:
        env.restart()
        total, invalid = 0.0, False
        for legal in plan:
            if env.done:
                break
            actions = env.legal_actions()
            action = actions[int(legal_rng.integers(len(actions)))] if legal else None
            invalid |= action is None
            result = env.step(action)
            total += result.reward
        if env.done and result.outcome is Outcome.TIMEOUT and invalid:
            yield total


# ---------------------------------------------------------------- Kuhn Poker


def kuhn_worst_legal_chips(cards: tuple[int, int], seat: int, opponent) -> int:
    """The least the agent can end a hand with, over its every legal line and
    every move the opponent plays with positive probability."""
    def worst(state: KuhnState) -> int:
        if state.is_terminal():
            return state.returns()[seat]
        if state.to_move == seat:
            moves = (PASS, BET)
        else:
            p_bet = opponent.probability_of_bet(state.infoset(state.to_move))
            moves = tuple(m for m, p in ((PASS, 1 - p_bet), (BET, p_bet)) if p > 0)
        return min(worst(state.apply(m)) for m in moves)
    return worst(KuhnState(cards))


def test_kuhn_stalled_hands_pay_at_most_the_worst_legal_hand() -> None:
    settings = KuhnPokerSettings()  # 6 turns, 5 per chip
    worst_legal = min(kuhn_worst_legal_chips(cards, seat, opponent)
                      for cards in DEALS for seat in (0, 1) for opponent in ARCHETYPES.values())
    assert worst_legal == -2  # J against K, bet and called (hand-checked)
    # Every sequence of turns (PASS, BET or invalid) up to the turn limit, every deal, seat, archetype.
    turns = (MOVE_NAMES[PASS], MOVE_NAMES[BET], None)
    stalled = []
    for cards, seat, opponent in itertools.product(DEALS, (0, 1), ARCHETYPES.values()):
        per_case_worst = kuhn_worst_legal_chips(cards, seat, opponent) * settings.reward_per_chip
        seen: set[tuple] = set()
        for plan in itertools.product(turns, repeat=settings.max_turns):
            env = KuhnPokerEnv(settings, opponent, seat, np.random.default_rng(0))
            env.fix_deals([cards])
            played, total = [], 0.0
            for action in plan:
                if env.done:
                    break
                result = env.step(action)
                played.append(action)
                total += result.reward
            if tuple(played) in seen:
                continue
            seen.add(tuple(played))
            if result.outcome is Outcome.TIMEOUT:
                assert None in played  # legal play alone never reaches the turn limit
                assert total <= per_case_worst and total <= worst_legal * settings.reward_per_chip
                stalled.append(total)
    # All six turns invalid, and the mixes (e.g. PASS facing no bet, then invalid to the limit).
    assert stalled and set(stalled) == {-10.0}


# ---------------------------------------------------------------- Tic-Tac-Toe

#: The balanced population's opponents whose every possible move can be searched exactly.
TTT_SEARCHABLE = ["pattern-center_corners_edges", "pattern-corners", "pattern-edges", "pattern-diagonal",
                  "pattern-anti_diagonal", "pattern-corners_bottom_right", "random"]


def ttt_worst_legal(seat: int, opponent_name: str, settings: TicTacToeSettings) -> float:
    """The least a legal game can pay the agent within the turn limit, over its
    every move and (for ``random``) every opponent move; deterministic patterns
    answer as they play."""
    opponent = make_opponent("tic_tac_toe", opponent_name, OPPONENT_SETTINGS)
    rng = np.random.default_rng(0)

    def outcome(state: TicTacToeState) -> float:
        winner = state.winner()
        if winner is None:
            return settings.draw_reward
        return settings.win_reward if winner == seat else settings.loss_reward

    def replies(state: TicTacToeState) -> list[TicTacToeState]:
        if opponent_name == "random":
            return [state.apply(m) for m in state.legal_moves()]
        return [state.apply(opponent.act(state, rng))]

    @functools.lru_cache(maxsize=None)
    def worst(state: TicTacToeState, turns_left: int) -> float:
        if state.is_terminal():
            return outcome(state)
        if turns_left == 0:
            return 0.0  # a legal timeout pays nothing
        values = []
        for move in state.legal_moves():
            after = state.apply(move)
            if after.is_terminal():
                values.append(outcome(after))
            else:
                values += [worst(reply, turns_left - 1) for reply in replies(after)]
        return min(values)

    starts = [initial_state()] if seat == 0 else replies(initial_state())
    return min(worst(s, settings.max_turns) for s in starts)


@pytest.mark.parametrize("seat", [0, 1])
@pytest.mark.parametrize("opponent_name", TTT_SEARCHABLE + ["mcts-100"])
def test_ttt_stalled_games_pay_at_most_the_worst_legal_game(opponent_name: str, seat: int) -> None:
    settings = TicTacToeSettings()
    # A loss is reachable against every searchable opponent; MCTS-100 plays one of random's moves.
    worst_legal = ttt_worst_legal(seat, "random" if opponent_name == "mcts-100" else opponent_name, settings)
    assert worst_legal == settings.loss_reward
    opponent = make_opponent("tic_tac_toe", opponent_name, OPPONENT_SETTINGS)
    env = TicTacToeEnv(settings, opponent, seat, np.random.default_rng(seat))
    env.reset()
    rng = np.random.default_rng(1)
    all_invalid = [[False] * settings.max_turns]
    count = 8 if opponent_name == "mcts-100" else 64
    mixes = [list(rng.random(settings.max_turns) < p) for p in np.linspace(0.2, 0.8, count)]
    stalled = list(stalled_returns(env, all_invalid + mixes, rng))
    assert len(stalled) >= 2  # all-invalid plus at least one mix timed out
    assert max(stalled) <= worst_legal


# ---------------------------------------------------------------- Sokoban


def sokoban_worst_legal(level: SokobanLevel, s: SokobanSettings) -> float:
    """The least task-reward total over every legal episode: turns of 1..moves_per_turn
    primitive moves, gym-sokoban's per-move rewards, the episode over when solved
    or after ``max_turns`` turns. Search over (player, boxes, turns left, moves
    already made in the current turn)."""
    neighbours, targets = level.neighbours(), level.targets

    @functools.lru_cache(maxsize=None)
    def worst(player: int, boxes: int, turns_left: int, moves_made: int) -> float:
        values = []
        if moves_made > 0:  # end the turn here
            values.append(0.0 if turns_left == 1 else worst(player, boxes, turns_left - 1, 0))
        if moves_made < s.moves_per_turn:
            before = (boxes & targets).bit_count()
            for direction in range(4):
                p2, b2 = move_state(neighbours, player, boxes, direction)
                after = (b2 & targets).bit_count()
                reward = s.step_penalty + (s.box_on_target if after > before else 0.0) \
                    + (s.box_off_target if after < before else 0.0)
                if b2 == targets:
                    values.append(reward + s.all_boxes_on_target)
                else:
                    values.append(reward + worst(p2, b2, turns_left, moves_made + 1))
        return min(values)

    return worst(level.player, level.boxes, s.max_turns, 0)


def sokoban_levels() -> list[tuple[SokobanLevel, SokobanSettings]]:
    small = SokobanSettings(dim_room=5, num_boxes=1, max_turns=4, min_solution_moves=3, max_solution_moves=10)
    paper = SokobanSettings(max_turns=4)
    generated = [(generate_level(np.random.default_rng(seed), s.dim_room, s.num_boxes, s.min_solution_moves,
                                 s.max_solution_moves), s) for s, seed in ((small, 0), (small, 1), (paper, 2))]
    # A box that starts on a target: pushing it off is legal play's worst move.
    on_target = SokobanLevel.from_rows(["#######", "#P√_O_#", "#____X#", "#######"])
    return generated + [(on_target, SokobanSettings(num_boxes=2, max_turns=3))]


@pytest.mark.parametrize("index", range(4))
def test_sokoban_stalled_episodes_pay_at_most_the_worst_legal_episode(index: int) -> None:
    level, settings = sokoban_levels()[index]
    worst_legal = sokoban_worst_legal(level, settings)
    env = SokobanEnv(settings, np.random.default_rng(0), level)
    env.reset()
    assert env.legal_return_floor() <= worst_legal + 1e-9
    rng = np.random.default_rng(index)
    plans = [[False] * settings.max_turns] + [list(rng.random(settings.max_turns) < 0.6) for _ in range(40)]
    stalled = list(stalled_returns(env, plans, rng))
    assert len(stalled) >= 2
    assert max(stalled) <= worst_legal + 1e-9
    assert all(math.isclose(total, env.legal_return_floor(), abs_tol=1e-9) for total in stalled)


# ---------------------------------------------------------------- WebShop


@pytest.mark.parametrize("partial_reward_scale", [0.0, 0.5])
def test_webshop_stalled_episodes_pay_the_worst_legal_episode(tmp_path, partial_reward_scale: float) -> None:
    # Every turn but a purchase pays 0 and a purchase pays success_reward or partial_reward_scale x its
    # score in [0, 1]: legal play's worst episode is 0 (a timeout, or a purchase scoring 0), which is
    # what a stalled episode pays, with no rule of its own (the floor is 0; docs/rewards.md).
    from mage_core.envs.webshop.catalogue import generate_catalogue, load_catalogue, write_catalogue
    from mage_core.envs.webshop.env import WebShopEnv
    from mage_core.envs.webshop.params import WebShopSettings

    catalogue = load_catalogue(write_catalogue(generate_catalogue(np.random.default_rng(0)), tmp_path))
    settings = WebShopSettings(max_turns=6, partial_reward_scale=partial_reward_scale)
    env = WebShopEnv(settings, np.random.default_rng(1), catalogue, catalogue.goals)
    worst_legal = math.inf
    for _ in range(5):  # five goals: a legal timeout, and buying each result of the goal's search as it is
        env.reset()
        legal_timeout = [env.step(env.legal_actions()[0]).reward for _ in range(settings.max_turns)]
        assert env.done and sum(legal_timeout) == 0.0
        worst_legal = min(worst_legal, sum(legal_timeout))
        for i in range(10):
            env.restart()
            env.step(env.search_action())
            results = [a for a in env.legal_actions() if a not in ("click[back to search]", "click[next >]")]
            if i >= len(results):
                break
            env.step(results[i])
            bought = env.step("click[buy now]")
            assert bought.done and bought.outcome in (Outcome.WIN, Outcome.LOSS)
            worst_legal = min(worst_legal, bought.reward)
        assert env.legal_return_floor() == 0.0
    assert worst_legal == 0.0
    rng = np.random.default_rng(2)
    plans = [[False] * settings.max_turns] + [list(rng.random(settings.max_turns) < 0.7) for _ in range(60)]
    env.reset()
    stalled = list(stalled_returns(env, plans, rng))
    assert len(stalled) >= 5
    assert all(total == 0.0 == worst_legal for total in stalled)
