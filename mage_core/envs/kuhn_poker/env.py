"""Kuhn Poker from the agent's seat: text observations, action parsing, rewards.

One episode is one hand (docs/method.md sections 1-3, 10). The agent sits in seat 0
(acts first) or seat 1; the opponent acts as soon as it is its turn. The task
reward is ``reward_per_chip`` x the agent's net chips, given on the turn the
hand ends (reference code: 5 x chips). ``restart()`` replays the same deal for
the next episode of a meta-episode; ``reset()`` deals a new hand.

Stalling (docs/rewards.md): legal play ends a hand within two agent turns, so
only invalid turns (no move, the opponent waits) reach the turn limit. Such a
hand pays ``legal_return_floor()`` = -2 chips x ``reward_per_chip``, the most a
hand can lose, on its last turn; otherwise stalling (-0.5 per invalid turn)
would beat folding (-1 chip = -5). Its ``agent_chips`` stay 0 (no chips changed
hands), but its reward, and so the reported score, is the worst loss.

Hidden information (section 2): the observation shows the opponent's card only
after a showdown, never after a fold, and ``info`` follows the same rule.

Action grammar (inside ``<action>...</action>``, case-insensitive, optional
quotes/brackets/asterisks/final period around one word):

- ``PASS`` and ``BET`` always;
- ``CHECK`` means PASS, but only when no bet is pending;
- ``FOLD`` means PASS and ``CALL`` means BET, but only when facing a bet;
- anything else (``RAISE``: Kuhn has no raises; ``PASS or BET``; a misused
  synonym) is invalid, so every accepted word has exactly one meaning.
"""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np

from mage_core.envs.base import Opponent, Outcome, StepResult, check_generator, extract_action_text
from mage_core.envs.kuhn_poker.params import KuhnPokerSettings
from mage_core.envs.kuhn_poker.rules import BET, CARD_LETTERS, DEALS, MOVE_NAMES, PASS, KuhnState, deal
from mage_core.envs.rewards import stalled_timeout_reward


_CANONICAL: dict[str, int] = {"PASS": PASS, "BET": BET}
_WORD = re.compile(r"^[\s\"'`*\[(<]*([A-Za-z]+)[\s\"'`*\])>.!]*$")

#: word -> (move, when it is allowed: "always", "no_bet" or "facing_bet").
_WORDS: dict[str, tuple[int, str]] = {
    "PASS": (PASS, "always"),
    "BET": (BET, "always"),
    "CHECK": (PASS, "no_bet"),
    "FOLD": (PASS, "facing_bet"),
    "CALL": (BET, "facing_bet"),
}


class KuhnPokerEnv:
    """One hand of Kuhn Poker against a stationary opponent (Env protocol)."""

    name = "kuhn_poker"

    def __init__(
        self,
        settings: KuhnPokerSettings,
        opponent: Opponent,
        agent_seat: int,
        rng: np.random.Generator,
    ) -> None:
        if not isinstance(settings, KuhnPokerSettings):
            raise TypeError(f"settings must be KuhnPokerSettings, got {type(settings).__name__}")
        if agent_seat not in (0, 1):
            raise ValueError(f"agent_seat must be 0 (acts first) or 1 (acts second), got {agent_seat!r}")
        self.settings = settings
        self.opponent = opponent
        self.agent_seat = agent_seat
        self._rng = check_generator(rng, "KuhnPokerEnv")
        self._cards: tuple[int, int] | None = None
        self._fixed_deals: list[tuple[int, int]] = []
        self._state: KuhnState | None = None
        self._turn = 0
        self._done = False
        self._outcome: Outcome | None = None

    # ------------------------------------------------------------------ life cycle

    def reset(self) -> None:
        """Deal a new hand (the next fixed deal, if any; else from the env's
        generator) and start it."""
        self._cards = self._fixed_deals.pop(0) if self._fixed_deals else deal(self._rng)
        self._start()

    def fix_deals(self, deals: Sequence[tuple[int, int]]) -> None:
        """Play these deals ((player 0's card, player 1's card), cards 0=J 1=Q 2=K)
        in order: the current hand is dealt anew with the first (call it before
        anything is played), each later ``reset()`` takes the next, and random
        deals resume after the last. Exact evaluation enumerates every deal
        sequence this way (``mage_core.envs.kuhn_poker.exact_greedy``)."""
        deals = [tuple(int(c) for c in d) for d in deals]
        for d in deals:
            if d not in DEALS:
                raise ValueError(f"fix_deals: {d} is not a deal of two distinct cards from 0, 1, 2")
        if not deals:
            raise ValueError("fix_deals: give at least one deal")
        if self._turn:
            raise RuntimeError("fix_deals: the current hand is already being played")
        self._fixed_deals = list(deals[1:])
        self._cards = deals[0]  # type: ignore[assignment]
        self._start()

    def restart(self) -> None:
        """Replay the same deal (both cards). A stochastic opponent re-draws its
        moves; a deterministic one repeats them."""
        if self._cards is None:
            raise RuntimeError("restart() before the first reset(): no deal to replay")
        self._start()

    def _start(self) -> None:
        assert self._cards is not None
        self._state = KuhnState(self._cards)
        self._turn = 0
        self._done = False
        self._outcome = None
        if self.agent_seat == 1:
            self._opponent_moves()

    @property
    def done(self) -> bool:
        return self._done

    @property
    def turn(self) -> int:
        return self._turn

    def legal_return_floor(self) -> float:
        """The worst task reward legal play can earn: losing a bet and a call,
        -2 chips (any deal, seat and opponent); what a stalled hand pays."""
        return -2 * self.settings.reward_per_chip

    @property
    def state(self) -> KuhnState:
        """The full game state (both cards): for rollouts' bookkeeping and
        tests, never for anything the agent is shown."""
        return self._live_state()

    def _live_state(self) -> KuhnState:
        if self._state is None:
            raise RuntimeError("call reset() before using the environment")
        return self._state

    # ------------------------------------------------------------------ actions

    def legal_actions(self) -> list[str]:
        return [] if self._done else [MOVE_NAMES[PASS], MOVE_NAMES[BET]]

    def _facing_bet(self) -> bool:
        return BET in self._live_state().history

    def parse_action(self, response: str) -> str | None:
        """The canonical action ("PASS"/"BET") in a response, or None; see the
        module docstring for the grammar. Never raises."""
        if self._done or self._state is None or not isinstance(response, str):
            return None
        text = extract_action_text(response)
        if text is None:
            return None
        match = _WORD.match(text)
        if match is None:
            return None
        word = _WORDS.get(match.group(1).upper())
        if word is None:
            return None
        move, when = word
        if when == "always" or (when == "facing_bet") == self._facing_bet():
            return MOVE_NAMES[move]
        return None

    def step(self, action: str | None) -> StepResult:
        """Play the agent's action (canonical "PASS"/"BET"; anything else is an
        invalid turn), then the opponent's reply if the hand goes on."""
        state = self._live_state()
        if self._done:
            raise RuntimeError("the hand is over: call restart() or reset()")
        self._turn += 1
        move = _CANONICAL.get(action) if isinstance(action, str) else None
        if move is not None:
            self._state = state.apply(move)
            if not self._state.is_terminal():
                self._opponent_moves()
            if self._state.is_terminal():
                return self._finish()
        if self._turn >= self.settings.max_turns:
            # Only invalid turns reach the limit (a legal hand ends within two
            # agent turns): pay the floor (module docstring, "Stalling").
            self._done = True
            self._outcome = Outcome.TIMEOUT
            reward = stalled_timeout_reward(0.0, 0.0, self.legal_return_floor())
            return StepResult(reward, True, move is None, Outcome.TIMEOUT, self._info())
        return StepResult(0.0, False, move is None, None, self._info())

    def _opponent_moves(self) -> None:
        state = self._live_state()
        move = self.opponent.act(state, self._rng)
        if move not in state.legal_moves():
            raise ValueError(f"opponent {self.opponent.name!r} chose illegal move {move!r}")
        self._state = state.apply(move)

    def _finish(self) -> StepResult:
        self._done = True
        chips = self._agent_chips()
        self._outcome = Outcome.WIN if chips > 0 else Outcome.LOSS  # Kuhn has no ties
        return StepResult(self.settings.reward_per_chip * chips, True, False, self._outcome, self._info())

    def _agent_chips(self) -> int:
        state = self._live_state()
        return state.returns()[self.agent_seat] if state.is_terminal() else 0

    def _info(self) -> dict[str, object]:
        """Only what the agent may know (its card, the betting; the opponent's
        card after a showdown)."""
        state = self._live_state()
        info: dict[str, object] = {
            "agent_seat": self.agent_seat,
            "agent_card": CARD_LETTERS[state.cards[self.agent_seat]],
            "history": state.history_string(),
        }
        if self._done:
            info["agent_chips"] = self._agent_chips()
            info["showdown"] = state.is_showdown()
            info["opponent_card"] = CARD_LETTERS[state.cards[1 - self.agent_seat]] if state.is_showdown() else None
        return info

    # ------------------------------------------------------------------ text

    def observation(self) -> str:
        """Seat, card, betting by name and actor, pot, then legal actions while
        the hand is live or the result when it is over."""
        state = self._live_state()
        me = self.agent_seat
        order = "first" if me == 0 else "second"
        put_in = state.contributions()
        lines = [
            f"Kuhn Poker. You are Player {me}: you act {order}.",
            f"Your card: {CARD_LETTERS[state.cards[me]]}",
            f"Betting: {self._betting_text()}",
            f"Pot: {sum(put_in)} chips (you put in {put_in[me]}, the opponent {put_in[1 - me]})",
        ]
        if self._done:
            lines.append(self._result_text())
        elif self._facing_bet():
            lines.append("Legal actions: PASS (fold), BET (call 1 chip)")
        else:
            lines.append("Legal actions: PASS (check), BET (bet 1 chip)")
        return "\n".join(lines)

    def compact_observation(self) -> str:
        """The same facts, one token each, for small models (prompt style
        ``compact``): the card, then the betting as ``me``/``op`` fused with the
        action (``opBET``, ``mePASS``: the agent's own moves are the very words
        it answers with, ``compact_action``), then at the end ``show<card>`` or
        ``fold`` (or ``timeout``) and the result ``won1``/``won2``/``lost1``/
        ``lost2``. Example: ``Q opBET meBET showK lost2``."""
        state = self._live_state()
        parts = [CARD_LETTERS[state.cards[self.agent_seat]]]
        for i, move in enumerate(state.history):
            parts.append(("me" if i % 2 == self.agent_seat else "op") + MOVE_NAMES[move])
        if self._done:
            if self._outcome is Outcome.TIMEOUT:
                parts.append("timeout")
            else:
                parts.append("show" + CARD_LETTERS[state.cards[1 - self.agent_seat]] if state.is_showdown()
                             else "fold")
                chips = self._agent_chips()
                parts.append(f"{'won' if chips > 0 else 'lost'}{abs(chips)}")
        return " ".join(parts)

    def compact_action(self, action: str) -> str:
        """A legal action as the one word the compact style answers with: the
        agent's move as its observation shows it (``mePASS``, ``meBET``)."""
        return "me" + action

    def _betting_text(self) -> str:
        history = self._live_state().history
        if not history:
            return "none yet"
        who = {self.agent_seat: "you", 1 - self.agent_seat: "opponent"}
        return ", ".join(f"Player {i % 2} ({who[i % 2]}) {MOVE_NAMES[m]}" for i, m in enumerate(history))

    def _result_text(self) -> str:
        state = self._live_state()
        if self._outcome is Outcome.TIMEOUT:
            return ("Hand over: the turn limit was reached before the betting ended. No chips change hands, "
                    "but a stalled hand scores as the worst loss, -2 chips.")
        chips = self._agent_chips()
        amount = f"{abs(chips)} chip{'s' if abs(chips) != 1 else ''}"
        result = f"you won {amount}" if chips > 0 else f"you lost {amount}"
        if not state.is_showdown():
            # The hand ended without a showdown: the last mover folded.
            folder = "you" if (len(state.history) - 1) % 2 == self.agent_seat else "the opponent"
            return f"Hand over: {folder} folded, {result}."
        mine = CARD_LETTERS[state.cards[self.agent_seat]]
        theirs = CARD_LETTERS[state.cards[1 - self.agent_seat]]
        return f"Hand over: showdown, the opponent's card is {theirs} (yours {mine}), {result}."
