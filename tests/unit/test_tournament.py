"""Head-to-head matches: seats, seeding and outcomes with known values."""

from __future__ import annotations

from fractions import Fraction

import pytest

from mage_core.envs import registry as games
from mage_core.evaluation.tournament import play_match
from mage_core.opponents.registry import make_opponent

pytestmark = pytest.mark.unit


def match(game: str, a: str, b: str, n: int, seed: int = 0):
    return play_match(game, lambda rng: games.initial_state(game, rng), make_opponent(game, a),
                      make_opponent(game, b), n, seed)


def test_seats_alternate_and_counts_add_up() -> None:
    r = match("tic_tac_toe", "minimax", "random", 30)
    assert r.seats == [i % 2 for i in range(30)]
    wins, draws, losses = r.counts()
    assert wins + draws + losses == 30
    assert losses == 0  # perfect play never loses


def test_minimax_mirror_is_always_a_draw() -> None:
    r = match("tic_tac_toe", "minimax", "minimax", 20)
    assert r.counts() == (0, 20, 0)


def test_pattern_player_never_beats_minimax() -> None:
    r = match("tic_tac_toe", "pattern-corners", "minimax", 10)
    assert r.counts()[0] == 0


def test_same_seed_same_match_and_different_seed_differs() -> None:
    a = match("tic_tac_toe", "mcts-30", "random", 20, seed=4)
    b = match("tic_tac_toe", "mcts-30", "random", 20, seed=4)
    c = match("kuhn_poker", "random", "random", 50, seed=5)
    d = match("kuhn_poker", "random", "random", 50, seed=6)
    assert a.payoffs == b.payoffs
    assert c.payoffs != d.payoffs


class CardSpy:
    """Wraps a Kuhn player and records the deal of every hand it acts in."""

    def __init__(self, inner) -> None:
        self.inner, self.name, self.deals = inner, inner.name, []

    def act(self, state, rng):
        if len(state.history) < 2:
            self.deals.append(state.cards)
        return self.inner.act(state, rng)


def test_kuhn_deals_are_shared_across_matchups() -> None:
    # Common random numbers: with one seed, game i deals the same cards whoever plays.
    spies = []
    for opponent in ("aggressive", "conservative"):
        spy = CardSpy(make_opponent("kuhn_poker", "random"))
        play_match("kuhn_poker", lambda rng: games.initial_state("kuhn_poker", rng), spy,
                   make_opponent("kuhn_poker", opponent), 40, seed=9)
        spies.append(spy)
    # Each player acts at least once per hand, before the history is 2 long, so
    # the spy logs exactly one deal per hand.
    assert len(spies[0].deals) == len(spies[1].deals) == 40
    assert len(set(spies[0].deals)) > 1
    assert spies[0].deals == spies[1].deals


def test_kuhn_mean_chips_converge_to_the_exact_value() -> None:
    # Best response to "aggressive" earns exactly 1/3 per hand in either seat
    # (docs/method.md section 11). Play it as a behaviour strategy over 6000 hands.
    from mage_core.envs.kuhn_poker.analysis import best_response
    from mage_core.opponents.kuhn import ARCHETYPES, BehaviourStrategy

    seat0 = best_response([(1, ARCHETYPES["aggressive"])], 0)[1]
    seat1 = best_response([(1, ARCHETYPES["aggressive"])], 1)[1]
    exploiter = BehaviourStrategy("exploiter", {**seat0, **seat1})
    result = play_match("kuhn_poker", lambda rng: games.initial_state("kuhn_poker", rng), exploiter,
                        ARCHETYPES["aggressive"], 6000, seed=1)
    mean = result.summary()
    # The exploiter is deterministic, so only the deals are random: 4 sigma band.
    assert mean["mean_payoff_low"] - 0.02 <= float(Fraction(1, 3)) <= mean["mean_payoff_high"] + 0.02
    assert abs(mean["mean_payoff"] - 1 / 3) < 0.06


def test_bad_game_count_is_refused() -> None:
    with pytest.raises(ValueError, match="num_games"):
        match("tic_tac_toe", "random", "random", 0)
