"""Kuhn Poker rules, agent env and behaviour-strategy opponents (docs/method.md sections 2, 3, 7, 11)."""

from __future__ import annotations

import itertools
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest

from mage_core.envs.base import TERMINAL, Env, GameState, Opponent, Outcome
from mage_core.envs.kuhn_poker.env import KuhnPokerEnv
from mage_core.envs.kuhn_poker.params import KuhnPokerSettings
from mage_core.envs.kuhn_poker.rules import (
    ALL_INFOSETS,
    BET,
    DEALS,
    INFOSETS_BY_SEAT,
    PASS,
    KuhnState,
    deal,
    initial_state,
)
from mage_core.opponents.kuhn import (
    ARCHETYPES,
    BehaviourStrategy,
    archetype,
    equilibrium,
    to_fraction,
    validate_behaviour,
)

pytestmark = pytest.mark.unit

J, Q, K = 0, 1, 2
P, B = PASS, BET


# -- rules ---------------------------------------------------------------------

# Player 0's chips, worked by hand from the ante-1 rules: (cards, history) -> chips.
HAND_WORKED = [
    ((K, J), (P, P), 1), ((K, J), (B, P), 1), ((K, J), (B, B), 2), ((K, J), (P, B, P), -1), ((K, J), (P, B, B), 2),
    ((J, Q), (P, P), -1), ((J, Q), (B, P), 1), ((J, Q), (B, B), -2), ((J, Q), (P, B, P), -1), ((J, Q), (P, B, B), -2),
]


@pytest.mark.parametrize(("cards", "history", "chips"), HAND_WORKED)
def test_payoffs_match_hand_worked_values(cards, history, chips):
    state = KuhnState(cards, history)
    assert state.is_terminal() and state.to_move == TERMINAL and state.legal_moves() == ()
    assert state.returns() == (chips, -chips)


def tree(state: KuhnState):
    yield state
    for move in state.legal_moves():
        yield from tree(state.apply(move))


def test_game_tree_shape_and_infosets():
    states = [s for cards in DEALS for s in tree(KuhnState(cards))]
    terminal = [s for s in states if s.is_terminal()]
    assert len(DEALS) == 6 and len(states) == 6 * 9 and len(terminal) == 6 * 5
    assert {s.history_string() for s in terminal} == {"pp", "bp", "bb", "pbp", "pbb"}
    assert all(sum(s.returns()) == 0 for s in terminal)
    seen = {seat: {s.infoset(seat) for s in states if s.to_move == seat} for seat in (0, 1)}
    assert seen == {0: set(INFOSETS_BY_SEAT[0]), 1: set(INFOSETS_BY_SEAT[1])}
    assert len(ALL_INFOSETS) == 12


def test_state_protocol_apply_and_errors():
    state = KuhnState((Q, K))
    assert isinstance(state, GameState)
    after = state.apply(P).apply(B)
    assert state.history == () and after.history == (P, B) and after.to_move == 0
    assert after.infoset(0) == "Qpb" and after.infoset(1) == "Kpb"
    assert KuhnState((Q, K), (P,)).infoset(1) == "Kp" and KuhnState((J, Q), (B,)).infoset(1) == "Qb"
    assert after.contributions() == (1, 2) and after.apply(B).contributions() == (2, 2)
    assert after.key() == ((Q, K), (P, B)) and hash(after) == hash(KuhnState([1, 2], [0, 1]))
    with pytest.raises(ValueError, match="move must be 0"):
        state.apply(2)
    with pytest.raises(ValueError, match="finished hand"):
        KuhnState((Q, K), (P, P)).apply(P)
    with pytest.raises(ValueError, match="not terminal"):
        state.returns()
    with pytest.raises(ValueError, match="distinct"):
        KuhnState((Q, Q))
    with pytest.raises(ValueError, match="betting sequence"):
        KuhnState((Q, K), (B, B, B))


def test_deal_is_uniform_over_the_six_ordered_pairs_and_seeded():
    rng = np.random.default_rng(0)
    counts = Counter(deal(rng) for _ in range(6000))
    assert set(counts) == set(DEALS)
    assert all(900 < n < 1100 for n in counts.values()), counts  # ~6 sigma band around 1000
    a, b = np.random.default_rng(5), np.random.default_rng(5)
    assert [initial_state(a) for _ in range(10)] == [initial_state(b) for _ in range(10)]
    with pytest.raises(TypeError, match="Generator"):
        deal(5)


def test_payoffs_agree_with_openspiel():
    pyspiel = pytest.importorskip("pyspiel")
    game = pyspiel.load_game("kuhn_poker")
    for cards in DEALS:
        for state in tree(KuhnState(cards)):
            if not state.is_terminal():
                continue
            theirs = game.new_initial_state()
            for action in (*cards, *state.history):
                theirs.apply_action(action)
            assert theirs.is_terminal()
            assert tuple(theirs.returns()) == state.returns()


# -- behaviour strategies ------------------------------------------------------


def rule_from_method(name: str, card: int, facing_bet: bool) -> int:
    """docs/method.md section 7 in words, independently of the tables in kuhn.py."""
    if name == "conservative":
        return B if card == K else P
    if name == "aggressive":
        return (P if card == J else B) if facing_bet else B
    return {K: B, J: P, Q: P if facing_bet else B}[card]  # intermediate


@pytest.mark.parametrize("name", ["conservative", "aggressive", "intermediate"])
def test_archetypes_follow_method_in_both_seats(name):
    strategy = archetype(name)
    assert strategy.is_deterministic and strategy.name == name
    rng = np.random.default_rng(0)
    for cards in DEALS:
        for state in tree(KuhnState(cards)):
            if state.is_terminal():
                continue
            card = state.cards[state.to_move]
            assert strategy.act(state, rng) == rule_from_method(name, card, B in state.history), state


def test_unknown_archetype_lists_the_valid_ones():
    with pytest.raises(ValueError, match="conservative, aggressive, intermediate"):
        archetype("tight")


def test_validate_behaviour_reports_every_error():
    table = {key: 0 for key in ALL_INFOSETS if key not in ("Kb", "Qb")}
    table.update({"J": 1.5, "Xp": 0.5, "Q": "half", "K": True})
    errors = validate_behaviour(table)
    assert len(errors) == 5, errors
    text = "\n".join(errors)
    assert "J: P(BET) must be in [0, 1], got 1.5" in text
    assert "unknown information set 'Xp'; valid ones: J, Q, K, Jpb" in text
    assert "Q: P(BET)" in text and "K: P(BET)" in text
    assert "missing information sets: Qb, Kb" in text
    assert validate_behaviour([0.5]) == ["p_bet must be a mapping from information set to P(BET), got list"]
    with pytest.raises(ValueError, match="behaviour strategy 'bad'"):
        BehaviourStrategy("bad", table)


def test_probabilities_are_read_exactly():
    assert to_fraction(0.3) == Fraction(3, 10)
    assert to_fraction("1/3") == Fraction(1, 3)
    assert to_fraction(1) == 1 and to_fraction(Fraction(2, 7)) == Fraction(2, 7)
    table = {key: 0.25 for key in ALL_INFOSETS}
    table["Qb"] = "1/3"
    strategy = BehaviourStrategy("custom", table)
    assert strategy.probability_of_bet("Qb") == Fraction(1, 3) and strategy.p_bet["J"] == Fraction(1, 4)
    assert not strategy.is_deterministic


def test_deterministic_infosets_draw_nothing_and_mixed_ones_sample_their_probability():
    strategy = equilibrium(Fraction(1, 6))  # P1 "Qb" calls w.p. 1/3; P1 "Kb" always calls
    assert isinstance(strategy, Opponent)
    rng = np.random.default_rng(3)
    before = rng.bit_generator.state
    assert strategy.act(KuhnState((Q, K), (B,)), rng) == B
    assert rng.bit_generator.state == before
    calls = sum(strategy.act(KuhnState((K, Q), (B,)), rng) for _ in range(3000))
    assert 900 < calls < 1100  # 1000 expected, sd ~26
    with pytest.raises(TypeError, match="Generator"):
        strategy.act(KuhnState((K, Q), (B,)), 1)


def test_equilibrium_family_tables_and_range():
    strategy = equilibrium(Fraction(1, 9))
    assert strategy.seat_table(0) == {"J": Fraction(1, 9), "Q": 0, "K": Fraction(1, 3), "Jpb": 0,
                                      "Qpb": Fraction(4, 9), "Kpb": 1}
    assert strategy.seat_table(1) == {"Jp": Fraction(1, 3), "Qp": 0, "Kp": 1, "Jb": 0, "Qb": Fraction(1, 3),
                                      "Kb": 1}
    for bad in (Fraction(-1, 10), Fraction(1, 2)):
        with pytest.raises(ValueError, match=r"alpha must be in \[0, 1/3\]"):
            equilibrium(bad)


# -- agent env -----------------------------------------------------------------


def make_env(cards: tuple[int, int], seat: int, opponent: Opponent, **settings) -> KuhnPokerEnv:
    """An env whose first deal is ``cards`` (searching seeds keeps it seeded)."""
    for seed in range(200):
        env = KuhnPokerEnv(KuhnPokerSettings(**settings), opponent, seat, np.random.default_rng(seed))
        env.reset()
        if env.state.cards == cards:
            return env
    raise AssertionError("no seed deals these cards")


def test_settings_validation():
    assert KuhnPokerSettings() == KuhnPokerSettings(max_turns=6, reward_per_chip=5.0)
    # Every problem at once, each under its field (a pydantic ValidationError, a ValueError).
    with pytest.raises(ValueError, match=r"(?s)max_turns\s+Input should be greater than or equal to 2.*"
                                         r"reward_per_chip\s+Input should be greater than 0"):
        KuhnPokerSettings(max_turns=1, reward_per_chip=0.0)
    with pytest.raises(ValueError, match=r"reward_per_chip\s+Input should be a finite number"):
        KuhnPokerSettings(reward_per_chip=float("nan"))


def test_seat0_check_call_showdown_text_reward_and_info():
    env = make_env((K, Q), 0, ARCHETYPES["aggressive"])
    assert isinstance(env, Env) and env.name == "kuhn_poker"
    assert env.observation() == (
        "Kuhn Poker. You are Player 0: you act first.\nYour card: K\nBetting: none yet\n"
        "Pot: 2 chips (you put in 1, the opponent 1)\nLegal actions: PASS (check), BET (bet 1 chip)"
    )
    first = env.step("PASS")  # aggressive Q bets after a check
    assert (first.reward, first.done, first.invalid, first.outcome) == (0.0, False, False, None)
    assert "Q" not in str(first.info) and env.legal_actions() == ["PASS", "BET"]
    assert env.observation().endswith(
        "Betting: Player 0 (you) PASS, Player 1 (opponent) BET\n"
        "Pot: 3 chips (you put in 1, the opponent 2)\nLegal actions: PASS (fold), BET (call 1 chip)"
    )
    last = env.step("BET")
    assert (last.reward, last.done, last.invalid, last.outcome) == (10.0, True, False, Outcome.WIN)
    assert last.info == {"agent_seat": 0, "agent_card": "K", "history": "pbb", "agent_chips": 2,
                         "showdown": True, "opponent_card": "Q"}
    assert env.observation().endswith(
        "Pot: 4 chips (you put in 2, the opponent 2)\n"
        "Hand over: showdown, the opponent's card is Q (yours K), you won 2 chips."
    )
    assert env.legal_actions() == [] and env.turn == 2
    with pytest.raises(RuntimeError, match="hand is over"):
        env.step("PASS")


def test_seat1_fold_hides_the_opponent_card():
    env = make_env((K, J), 1, ARCHETYPES["conservative"])  # conservative bets its K first
    assert env.observation() == (
        "Kuhn Poker. You are Player 1: you act second.\nYour card: J\n"
        "Betting: Player 0 (opponent) BET\nPot: 3 chips (you put in 1, the opponent 2)\n"
        "Legal actions: PASS (fold), BET (call 1 chip)"
    )
    result = env.step("PASS")
    assert (result.reward, result.outcome) == (-5.0, Outcome.LOSS)
    assert result.info["opponent_card"] is None and result.info["showdown"] is False
    assert result.info["agent_chips"] == -1
    assert env.observation().endswith("Hand over: you folded, you lost 1 chip.")
    assert "K" not in env.observation().replace("Kuhn Poker", "")


@pytest.mark.parametrize("seat", [0, 1])
@pytest.mark.parametrize("name", ["conservative", "aggressive", "intermediate"])
def test_no_fold_ever_reveals_the_card_and_rewards_are_5x_chips(name, seat):
    # Every deal x every agent line: the opponent's card shows up iff showdown.
    for cards in DEALS:
        for moves in itertools.product(("PASS", "BET"), repeat=2):
            env = make_env(cards, seat, ARCHETYPES[name], reward_per_chip=2.5)
            for move in moves:
                if not env.done:
                    result = env.step(move)
            assert env.done
            opponent_letter = "JQK"[cards[1 - seat]]
            showdown = env.state.is_showdown()
            assert result.info["showdown"] == showdown
            assert result.info["opponent_card"] == (opponent_letter if showdown else None)
            assert ("the opponent's card is" in env.observation()) == showdown
            assert result.reward == 2.5 * env.state.returns()[seat]


def test_invalid_actions_count_turns_and_a_stalled_hand_pays_the_worst_loss():
    # Stalling rule (docs/rewards.md): a hand the turn limit ends pays -2 chips x 5 = -10.
    env = make_env((Q, J), 0, ARCHETYPES["aggressive"], max_turns=3)
    assert env.legal_return_floor() == -10.0
    start = env.observation()
    for _ in range(2):
        result = env.step(None)
        assert (result.reward, result.done, result.invalid) == (0.0, False, True)
        assert env.state.history == () and env.observation() == start  # the opponent did not move
    last = env.step("bet")
    assert last.invalid  # step takes canonical names only; parse_action maps synonyms
    assert (last.reward, last.done, last.outcome) == (-10.0, True, Outcome.TIMEOUT)
    assert env.done and env.turn == 3
    assert env.observation().endswith(
        "Hand over: the turn limit was reached before the betting ended. No chips change hands, "
        "but a stalled hand scores as the worst loss, -2 chips.")
    env.restart()
    assert not env.done and env.turn == 0 and env.observation() == start
    env.step(None)
    env.step(None)
    timeout = env.step("PASS")  # valid, the hand goes on (pb), but the turn limit ends it
    assert (timeout.reward, timeout.done, timeout.invalid, timeout.outcome) == (-10.0, True, False, Outcome.TIMEOUT)
    assert timeout.info["agent_chips"] == 0 and timeout.info["opponent_card"] is None
    # 2.5 per chip: the floor scales with it.
    scaled = make_env((Q, J), 1, ARCHETYPES["conservative"], max_turns=2, reward_per_chip=2.5)
    assert [scaled.step(None).reward for _ in range(2)] == [0.0, -5.0]


def test_restart_replays_the_deal_and_reset_deals_anew():
    env = KuhnPokerEnv(KuhnPokerSettings(), equilibrium(Fraction(1, 3)), 1, np.random.default_rng(1))
    with pytest.raises(RuntimeError, match="reset"):
        env.observation()
    with pytest.raises(RuntimeError, match="restart"):
        env.restart()
    env.reset()
    cards = env.state.cards
    for _ in range(20):
        env.step("BET")
        env.restart()
        assert env.state.cards == cards and env.turn == 0
    dealt = set()
    for _ in range(40):
        env.reset()
        dealt.add(env.state.cards)
    assert dealt == set(DEALS)


def test_same_seed_same_hands_with_a_stochastic_opponent():
    def transcript(seed: int) -> list[str]:
        env = KuhnPokerEnv(KuhnPokerSettings(), equilibrium(Fraction(1, 6)), 0, np.random.default_rng(seed))
        lines = []
        for _ in range(15):
            env.reset()
            while not env.done:
                env.step("PASS")
            lines.append(env.observation())
        return lines

    assert transcript(4) == transcript(4)
    assert transcript(4) != transcript(5)


PARSE_CASES = [
    # (history before the agent acts, response, parsed)
    ((), "<action>PASS</action>", "PASS"),
    ((), "Think... <action> bet </action>", "BET"),
    ((), "<action>**Bet**</action>", "BET"),
    ((), "<action>'PASS'.</action>", "PASS"),
    ((), "<action>CHECK</action>", "PASS"),
    ((), "<action>fold</action>", None),  # nothing to fold to
    ((), "<action>call</action>", None),  # nothing to call
    ((), "<action>RAISE</action>", None),
    ((), "<action>PASS or BET</action>", None),
    ((), "<action>BET</action> on second thought <action>PASS</action>", "PASS"),
    ((), "BET", None),
    ((), "<action></action>", None),
    ((B,), "<action>Fold</action>", "PASS"),
    ((B,), "<action>CALL</action>", "BET"),
    ((B,), "<action>check</action>", None),  # a bet is pending
]


@pytest.mark.parametrize(("history", "response", "parsed"), PARSE_CASES)
def test_parse_action(history, response, parsed):
    opponent = BehaviourStrategy("bettor", {key: 1 for key in ALL_INFOSETS})
    env = make_env((Q, K), 1, opponent) if history else make_env((Q, K), 0, opponent)
    assert env.state.history == history
    assert env.parse_action(response) == parsed
    assert env.parse_action(None) is None  # never raises, whatever it is given
