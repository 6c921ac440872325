"""Tic-Tac-Toe opponents: preferred patterns, minimax, MCTS (docs/method.md sections
7 and 11)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import pytest

from mage_core.envs.tic_tac_toe.rules import initial_state, play_moves
from mage_core.opponents.mcts import MCTSPlayer, fast_mcts_move, reference_mcts_move
from mage_core.opponents.minimax import MinimaxPlayer, best_response_value, move_values, solve
from mage_core.opponents.patterns import PATTERNS, PatternPlayer
from mage_core.opponents.random_player import UniformRandom

pytestmark = pytest.mark.unit


def play_game(x_player, o_player, rng: np.random.Generator) -> int | None:
    """The winner (0 = X, 1 = O) or None for a draw."""
    state = initial_state()
    while not state.is_terminal():
        state = state.apply((x_player if state.to_move == 0 else o_player).act(state, rng))
    return state.winner()


# -- preferred patterns --------------------------------------------------------

#: The reference population's orders as 0-based (row, col) pairs, copied by hand
#: from Lu-Yang666/MAGE verl/trainer/config/ppo_trainer.yaml.
REFERENCE_ORDERS = {
    "center_corners_edges": [(1, 1), (0, 0), (0, 2), (2, 0), (2, 2),
                             (0, 1), (1, 0), (1, 2), (2, 1)],
    "corners": [(0, 0), (0, 2), (2, 0), (2, 2), (1, 1), (0, 1), (1, 0), (1, 2), (2, 1)],
    "edges": [(0, 1), (1, 0), (1, 2), (2, 1), (1, 1), (0, 0), (0, 2), (2, 0), (2, 2)],
    "diagonal": [(0, 0), (1, 1), (2, 2), (0, 2), (2, 0), (0, 1), (1, 0), (1, 2), (2, 1)],
    "anti_diagonal": [(0, 2), (1, 1), (2, 0), (0, 0), (2, 2), (0, 1), (1, 0), (1, 2), (2, 1)],
    "corners_bottom_right": [(2, 2), (2, 0), (0, 2), (0, 0), (1, 1),
                             (2, 1), (1, 2), (1, 0), (0, 1)],
}


def test_patterns_are_the_reference_orders():
    assert set(PATTERNS) == set(REFERENCE_ORDERS)
    for name, pairs in REFERENCE_ORDERS.items():
        assert PATTERNS[name] == tuple(3 * r + c for r, c in pairs), name


def test_pattern_player_plays_the_first_empty_cell_of_its_order():
    player = PatternPlayer.from_pattern("edges")
    rng = np.random.default_rng(0)
    assert player.act(initial_state(), rng) == 1
    assert player.act(play_moves([1, 0, 3]), rng) == 5  # 1 and 3 taken
    assert player.act(play_moves([1, 3, 5, 7, 4, 0]), rng) == 2


def test_pattern_player_validation():
    with pytest.raises(ValueError, match="permutation"):
        PatternPlayer("bad", (0, 1, 2))
    with pytest.raises(ValueError, match="valid patterns: .*anti_diagonal"):
        PatternPlayer.from_pattern("spiral")
    assert PatternPlayer.from_pattern("corners", name="p1").name == "p1"


@pytest.mark.parametrize("pattern", sorted(PATTERNS))
@pytest.mark.parametrize("agent_seat", [0, 1])
def test_every_pattern_is_a_forced_win_in_both_seats(pattern, agent_seat):
    assert best_response_value(PatternPlayer.from_pattern(pattern), agent_seat) == 1


# -- minimax ---------------------------------------------------------------------


def test_solve_covers_every_position_and_perfect_play_draws():
    table = solve()
    assert len(table) == 5478
    assert table[initial_state().board] == 0
    assert table[play_moves([0, 3, 1, 4, 2]).board] == -1  # X just won: O "to move" lost


def test_solved_values_of_known_openings():
    # X to move after X's first move and O's reply (+1: X forces a win).
    table = solve()
    after_center = {o: table[play_moves([4, o]).board] for o in range(9) if o != 4}
    assert after_center == {0: 0, 2: 0, 6: 0, 8: 0, 1: 1, 3: 1, 5: 1, 7: 1}
    after_corner = {o: table[play_moves([0, o]).board] for o in range(1, 9)}
    assert after_corner == {4: 0, 1: 1, 2: 1, 3: 1, 5: 1, 6: 1, 7: 1, 8: 1}
    # Edge opening: O holds with the center, an adjacent corner or the far edge.
    after_edge = {o: table[play_moves([1, o]).board] for o in range(9) if o != 1}
    assert after_edge == {4: 0, 0: 0, 2: 0, 7: 0, 3: 1, 5: 1, 6: 1, 8: 1}
    assert set(move_values(initial_state()).values()) == {0}  # every opening draws


def test_minimax_wins_when_it_can_and_blocks_otherwise():
    rng = np.random.default_rng(0)
    for tie_break in ("first", "random"):
        player = MinimaxPlayer(tie_break=tie_break)
        assert player.act(play_moves([0, 3, 1, 4]), rng) == 2  # complete the top row
        assert player.act(play_moves([0, 4, 1]), rng) == 2  # block the top row


@pytest.mark.parametrize("tie_break", ["first", "random"])
def test_perfect_play_draws(tie_break):
    for seed in range(20):
        rng = np.random.default_rng(seed)
        x_player, o_player = MinimaxPlayer(tie_break=tie_break), MinimaxPlayer(tie_break=tie_break)
        assert play_game(x_player, o_player, rng) is None


def test_minimax_never_loses_to_random():
    minimax, random_player = MinimaxPlayer(), UniformRandom()
    as_x = Counter(play_game(minimax, random_player, np.random.default_rng(s)) for s in range(200))
    as_o = Counter(play_game(random_player, minimax, np.random.default_rng(s)) for s in range(200))
    assert as_x[1] == 0 and as_o[0] == 0
    assert as_x[0] > 150 and as_o[1] > 100  # and it mostly wins


def test_random_tie_break_varies_and_first_does_not():
    state = initial_state()
    random_player, first_player = MinimaxPlayer(), MinimaxPlayer(tie_break="first")
    random_moves = {random_player.act(state, np.random.default_rng(s)) for s in range(100)}
    first_moves = {first_player.act(state, np.random.default_rng(s)) for s in range(20)}
    assert random_moves == set(range(9)) and first_moves == {0}


def test_best_response_value_against_perfect_play_is_a_draw_and_needs_determinism():
    assert best_response_value(MinimaxPlayer(tie_break="first"), 0) == 0
    assert best_response_value(MinimaxPlayer(tie_break="first"), 1) == 0
    with pytest.raises(ValueError, match="deterministic"):
        best_response_value(UniformRandom(), 0)
    with pytest.raises(ValueError, match="agent_seat"):
        best_response_value(PatternPlayer.from_pattern("corners"), 2)
    with pytest.raises(ValueError, match="tie_break must be one of"):
        MinimaxPlayer(tie_break="last")


# -- MCTS ------------------------------------------------------------------------

SEARCHES = {"fast": fast_mcts_move, "reference": reference_mcts_move}


@pytest.mark.parametrize("search", sorted(SEARCHES))
def test_mcts_solver_takes_an_immediate_win(search):
    # X: 0, 1; O: 3, 4 (O threatens 5); X to move wins at 2.
    state = play_moves([0, 3, 1, 4])
    moves = {SEARCHES[search](state, 100, 1.4, True, np.random.default_rng(s)) for s in range(20)}
    assert moves == {2}


@pytest.mark.parametrize("search", sorted(SEARCHES))
def test_mcts_blocks_a_one_move_threat(search):
    state = play_moves([0, 4, 1])  # X threatens the top row; O must take 2
    moves = {SEARCHES[search](state, 200, 1.4, True, np.random.default_rng(s)) for s in range(20)}
    assert moves == {2}


#: 99.9% quantiles of the chi-square distribution by degrees of freedom (0 dof:
#: both searches chose one and the same move, the statistic is 0).
_CHI2_999 = {0: float("inf"), 1: 10.83, 2: 13.82, 3: 16.27, 4: 18.47, 5: 20.52, 6: 22.46,
             7: 24.32, 8: 26.12}


def _chi_square_homogeneity(a: Counter, b: Counter) -> tuple[float, int]:
    """Pearson's two-sample statistic and its degrees of freedom."""
    cells = sorted(set(a) | set(b))
    n_a, n_b = sum(a.values()), sum(b.values())
    statistic = 0.0
    for cell in cells:
        pooled = (a[cell] + b[cell]) / (n_a + n_b)
        for counts, n in ((a, n_a), (b, n_b)):
            expected = pooled * n
            statistic += (counts[cell] - expected) ** 2 / expected
    return statistic, len(cells) - 1


def _move_counts(search, moves: list[int], sims: int, seeds: range) -> Counter:
    state = play_moves(moves)
    return Counter(search(state, sims, 1.4, True, np.random.default_rng(s)) for s in seeds)


@pytest.mark.equivalence
@pytest.mark.parametrize("moves", [[], [4], [0, 4, 8]])
def test_fast_and_reference_mcts_choose_moves_alike(moves):
    fast = _move_counts(fast_mcts_move, moves, 100, range(200))
    reference = _move_counts(reference_mcts_move, moves, 100, range(1000, 1200))
    statistic, dof = _chi_square_homogeneity(fast, reference)
    assert statistic < _CHI2_999[dof], (fast, reference)
    assert len(fast) >= 4  # a spread distribution, so the comparison has power


def test_chi_square_check_detects_a_different_search():
    # Power check: at 200 runs the same test separates MCTS-100 from one with a
    # mis-set exploration constant (c = 4), which plays the fork-losing corners.
    fast = _move_counts(fast_mcts_move, [0, 4, 8], 100, range(200))
    state = play_moves([0, 4, 8])
    other = Counter(fast_mcts_move(state, 100, 4.0, True, np.random.default_rng(s))
                    for s in range(200))
    statistic, dof = _chi_square_homogeneity(fast, other)
    assert statistic > _CHI2_999[dof], (fast, other)


@pytest.mark.slow
@pytest.mark.equivalence
@pytest.mark.parametrize("moves", [[], [4], [0, 4, 8], [0, 4, 8, 2]])
def test_fast_mcts_matches_openspiel_mctsbot(moves):
    pyspiel = pytest.importorskip("pyspiel")
    from open_spiel.python.algorithms.mcts import MCTSBot, RandomRolloutEvaluator

    game = pyspiel.load_game("tic_tac_toe")
    theirs = Counter()
    for seed in range(600):
        random_state = np.random.RandomState(seed)
        bot = MCTSBot(game, 1.4, 100, RandomRolloutEvaluator(1, random_state), solve=True,
                      random_state=random_state)
        state = game.new_initial_state()
        for move in moves:
            state.apply_action(move)
        theirs[bot.step(state)] += 1
    ours = _move_counts(fast_mcts_move, moves, 100, range(600))
    statistic, dof = _chi_square_homogeneity(ours, theirs)
    assert statistic < _CHI2_999[dof], (ours, theirs)


def test_mcts_player_is_reproducible_and_validates():
    player = MCTSPlayer("mcts100", 100)
    state = play_moves([4])
    a = [player.act(state, np.random.default_rng(s)) for s in range(10)]
    assert a == [player.act(state, np.random.default_rng(s)) for s in range(10)]
    assert player.act(play_moves([0, 1, 2, 4, 3, 5, 7, 6]), np.random.default_rng(0)) == 8
    with pytest.raises(ValueError, match="num_simulations"):
        MCTSPlayer("m", 1)
    with pytest.raises(ValueError, match="uct_c"):
        MCTSPlayer("m", 100, uct_c=-1.0)
    with pytest.raises(TypeError, match="Generator"):
        player.act(state, 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-terminal"):
        fast_mcts_move(play_moves([0, 3, 1, 4, 2]), 100, 1.4, True, np.random.default_rng(0))


@dataclass(frozen=True)
class _Nim:
    """Take 1 or 2 from a pile; taking the last object wins (a non-TTT game)."""

    pile: int
    player: int = 0

    @property
    def to_move(self) -> int:
        return -2 if self.pile == 0 else self.player

    def legal_moves(self) -> tuple[int, ...]:
        return tuple(m for m in (1, 2) if m <= self.pile)

    def apply(self, move: int) -> "_Nim":
        return _Nim(self.pile - move, 1 - self.player)

    def is_terminal(self) -> bool:
        return self.pile == 0

    def returns(self) -> tuple[float, float]:
        return (-1.0, 1.0) if self.player == 0 else (1.0, -1.0)  # the last mover won

    def key(self) -> tuple[int, int]:
        return (self.pile, self.player)


def test_mcts_player_searches_other_games_with_the_reference_search():
    player = MCTSPlayer("mcts", 200)
    # Winning move: leave a multiple of 3.
    assert {player.act(_Nim(4), np.random.default_rng(s)) for s in range(10)} == {1}
    assert {player.act(_Nim(5), np.random.default_rng(s)) for s in range(10)} == {2}


def test_mcts_100_moving_second_often_loses_to_perfect_play():
    # docs/method.md section 11: MCTS-100 as O against perfect play loses ~45-50%.
    mcts, perfect = MCTSPlayer("mcts100", 100), MinimaxPlayer()
    results = Counter(play_game(perfect, mcts, np.random.default_rng(s)) for s in range(300))
    assert results[1] == 0
    assert 0.30 <= results[0] / 300 <= 0.60


def test_mcts_1000_moving_second_almost_never_loses():
    mcts, perfect = MCTSPlayer("mcts1000", 1000), MinimaxPlayer()
    results = Counter(play_game(perfect, mcts, np.random.default_rng(s)) for s in range(100))
    assert results[0] <= 5


def test_mcts_beats_random_and_is_not_random():
    mcts, random_player = MCTSPlayer("mcts100", 100), UniformRandom()
    results = Counter(play_game(mcts, random_player, np.random.default_rng(s)) for s in range(100))
    assert results[0] >= 85 and results[1] <= 2


@pytest.mark.slow
def test_mcts_loss_rates_against_perfect_play_large_sample():
    perfect = MinimaxPlayer()
    for sims, low, high, games in ((100, 0.38, 0.52, 2000), (1000, 0.0, 0.03, 500)):
        mcts = MCTSPlayer(f"mcts{sims}", sims)
        results = Counter(play_game(perfect, mcts, np.random.default_rng(s)) for s in range(games))
        assert low <= results[0] / games <= high, (sims, results)
