"""Arbitrary model output never breaks an action parser (hypothesis).

Whatever the text, ``parse_action`` returns None or one of the legal actions
of that moment; it never raises.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.envcases import Case

pytestmark = pytest.mark.contract

GAMES = [Case("tic_tac_toe", "random", 0), Case("kuhn_poker", "random", 1), Case("sokoban", None, 0),
         Case("minesweeper", None, 0)]

# Fragments that steer generated text toward the parsers' interesting branches.
FRAGMENTS = st.sampled_from([
    "<action>", "</action>", "<ACTION>", "(", ")", ",", " ", "1", "2", "3", "4", "0", "-1", "10",
    "PASS", "bet", "Bet", "fold", "call", "check", "up", "down", "left", "right", "UP", "\n", "\t",
    "<remark>", "</remark>", "up,", "(2, 3)", "reveal ", "é", "\u200b", "\x00", "½", "٣", "𝟐",
])
TEXT = st.one_of(
    st.text(max_size=200),
    st.lists(FRAGMENTS, max_size=30).map("".join),
    st.lists(st.one_of(FRAGMENTS, st.text(max_size=5)), max_size=20).map(
        lambda parts: "<action>" + "".join(parts) + "</action>"),
)


def live_envs(case: Case) -> list:
    """The env at its first turn and a little later (different legal sets)."""
    envs = []
    for steps in (0, 1):
        env = case.build(0)
        env.reset()
        for _ in range(steps):
            if not env.done:
                env.step(env.legal_actions()[0])
        if not env.done:
            envs.append(env)
    return envs


@pytest.mark.parametrize("case", GAMES, ids=lambda c: c.game)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=TEXT)
def test_parser_never_raises_and_returns_a_legal_action_or_none(case: Case, text: str) -> None:
    for env in live_envs(case):
        parsed = env.parse_action(text)
        assert parsed is None or parsed in env.legal_actions(), (text, parsed)


def test_fuzz_alphabet_reaches_valid_actions() -> None:
    # Guard against a fuzz test that only ever sees garbage: the fragments above
    # must be able to spell a legal action of every game.
    texts = ["<action>(2, 3)</action>", "<action>BET</action>", "<action>up</action>", "<action>reveal (2, 4)</action>"]
    for case, text in zip(GAMES, texts, strict=True):
        env = live_envs(case)[0]
        assert env.parse_action(text) is not None, case.game
