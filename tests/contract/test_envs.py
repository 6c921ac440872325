"""Properties every game must keep, over every opponent and seat.

Random legal play terminates within the turn limit with rewards in bounds;
every legal action survives render -> parse; the same seed replays the same
game; restart() returns to the episode's initial state.
"""

from __future__ import annotations

import numpy as np
import pytest

from mage_core.envs.base import Env, Outcome
from tests.envcases import CASES, CONFIG, DETERMINISTIC, Case

pytestmark = pytest.mark.contract


def reward_bounds(game: str) -> tuple[float, float]:
    """Bounds of one episode's summed task reward, derived from the settings."""
    if game == "tic_tac_toe":
        c = CONFIG.env.tic_tac_toe
        return c.loss_reward, c.win_reward
    if game == "kuhn_poker":
        return -2 * CONFIG.env.kuhn_poker.reward_per_chip, 2 * CONFIG.env.kuhn_poker.reward_per_chip
    c = CONFIG.env.sokoban
    moves = c.max_turns * c.moves_per_turn
    return (moves * c.step_penalty + c.num_boxes * c.box_off_target,
            c.num_boxes * c.box_on_target + c.all_boxes_on_target)


def play_random(env: Env, rng: np.random.Generator, invalid_every: int = 0) -> list[tuple[str, str | None, float]]:
    """Play one episode with uniformly random legal actions; returns the transcript."""
    transcript = []
    while not env.done:
        obs = env.observation()
        if invalid_every and env.turn % invalid_every == invalid_every - 1:
            action = None
        else:
            legal = env.legal_actions()
            assert legal, f"no legal actions in a live episode:\n{obs}"
            action = legal[int(rng.integers(len(legal)))]
        result = env.step(action)
        transcript.append((obs, action, result.reward))
        assert result.invalid == (action is None)
        assert result.done == env.done
        if result.done:
            assert isinstance(result.outcome, Outcome)
    return transcript


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_random_play_terminates_with_rewards_in_bounds(case: Case) -> None:
    low, high = reward_bounds(case.game)
    max_turns = getattr(CONFIG.env, case.game).max_turns
    for seed in range(5):
        env = case.build(seed)
        env.reset()
        transcript = play_random(env, np.random.default_rng(100 + seed), invalid_every=3 if seed == 4 else 0)
        assert 1 <= len(transcript) <= max_turns
        total = sum(r for _, _, r in transcript)
        assert low - 1e-9 <= total <= high + 1e-9, (case.id, total)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_every_legal_action_round_trips_through_text(case: Case) -> None:
    env = case.build(0)
    env.reset()
    rng = np.random.default_rng(1)
    while not env.done:
        legal = env.legal_actions()
        assert len(set(legal)) == len(legal)
        for action in legal:
            assert env.parse_action(f"<action>{action}</action>") == action
            assert env.parse_action(f"I think so.\n<action> {action} </action>\n") == action
        assert env.parse_action("no tags at all") is None
        env.step(legal[int(rng.integers(len(legal)))])


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_same_seed_same_game(case: Case) -> None:
    def transcript(seed: int) -> list:
        env = case.build(seed)
        env.reset()
        return play_random(env, np.random.default_rng(seed))

    assert transcript(11) == transcript(11)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_restart_returns_to_the_initial_state(case: Case) -> None:
    env = case.build(3)
    env.reset()
    first = env.observation()
    play_random(env, np.random.default_rng(5))
    env.restart()
    assert env.turn == 0 and not env.done
    if case.opponent is None or case.opponent in DETERMINISTIC or case.agent_seat == 0:
        # The opponent's opening (if any) is a function of the state: identical text.
        assert env.observation() == first
    play_random(env, np.random.default_rng(6))
    env.reset()
    assert env.turn == 0 and not env.done
