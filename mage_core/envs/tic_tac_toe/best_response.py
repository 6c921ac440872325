"""Best responses at Tic-Tac-Toe against the training population: the ceiling
next to every Tic-Tac-Toe learning figure (issue 12).

The agent's best achievable result against one opponent in one seat is an
expectimax over the game tree: the agent picks the move of highest value, the
opponent's move is a chance node with the opponent's move distribution at that
position. The opponents of docs/method.md section 7 are memoryless (a move depends
only on the position and fresh randomness; the environment's ``restart()``
replays only the opening), so this value is exact given the distributions, and
the same in every episode of a meta-episode: knowing the opponent, no episode
can do better. An agent that must first identify its opponent from the history
can reach at most this value, so it bounds the final episode of a meta-episode
from above.

Distributions: pattern players are deterministic and uniform random is
uniform, both exact, and so is a generated family's noisy pattern player (its
random move with probability noise, else its pattern's); MCTS, noisy or not, is estimated by running its search ``samples`` times
per position (a seeded generator), lazily for the positions the expectimax
reaches. An estimated distribution makes the maximum optimistic (the search
fits the sample noise), so :func:`play` plays the resulting policy against the
real opponent and gives an unbiased figure with its interval: what a perfect
exploiting player demonstrably reaches.

Objectives: ``win`` maximises the probability of winning (the paper's success
rate), ties broken towards fewer losses; ``safe`` plays only game-theoretically
optimal moves (the solved game's values: it never loses, whatever the opponent
does, since perfect play draws) and among them maximises wins; ``reward`` maximises the expected task reward (win 10 / draw 0
/ loss -10, i.e. P(win) - P(loss)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Literal

import numpy as np

from mage_core.envs.base import check_generator
from mage_core.envs.tic_tac_toe.rules import TicTacToeState, initial_state
from mage_core.opponents.minimax import move_values
from mage_core.opponents.patterns import PatternPlayer
from mage_core.opponents.random_player import UniformRandom
from mage_core.opponents.ttt_families import NoisyPlayer

Objective = Literal["win", "safe", "reward"]
OBJECTIVES: tuple[Objective, ...] = ("win", "safe", "reward")

#: Outcome probabilities for the agent: (win, draw, loss).
Outcome3 = tuple[float, float, float]


def _score(value: Outcome3, objective: Objective) -> tuple[float, float]:
    win, _draw, loss = value
    if objective == "reward":
        return (win - loss, win)
    return (win, -loss)  # "win", and "safe" among the optimal moves


def _is_exact(opponent: object) -> bool:
    """Whether an opponent's move distribution is known without sampling."""
    if isinstance(opponent, NoisyPlayer):
        return _is_exact(opponent.inner)
    return isinstance(opponent, (PatternPlayer, UniformRandom))


class MoveDistributions:
    """The opponent's move distribution per position, exact or estimated."""

    def __init__(self, opponent: object, samples: int, rng: np.random.Generator) -> None:
        if not callable(getattr(opponent, "act", None)):
            raise TypeError(f"opponent must have an act(state, rng) method, got {opponent!r}")
        if not isinstance(samples, int) or isinstance(samples, bool) or samples < 1:
            raise ValueError(f"samples must be an int >= 1, got {samples!r}")
        self.opponent = opponent
        self.samples = samples
        self.rng = check_generator(rng, "MoveDistributions")
        self.exact = _is_exact(opponent)
        self._cache: dict[tuple[int, ...], dict[int, float]] = {}

    def __call__(self, state: TicTacToeState) -> dict[int, float]:
        key = state.board
        found = self._cache.get(key)
        if found is None:
            found = self._cache[key] = self._distribution(state)
        return found

    @property
    def positions(self) -> int:
        return len(self._cache)

    def _distribution(self, state: TicTacToeState) -> dict[int, float]:
        legal = state.legal_moves()
        if isinstance(self.opponent, UniformRandom) or len(legal) == 1:
            return {int(m): 1.0 / len(legal) for m in legal}
        if isinstance(self.opponent, PatternPlayer):
            return {int(self.opponent.act(state, self.rng)): 1.0}
        if isinstance(self.opponent, NoisyPlayer) and _is_exact(self.opponent.inner):
            # A random move with probability noise, else the inner player's (exact) move.
            inner = MoveDistributions(self.opponent.inner, 1, self.rng)._distribution(state)
            noise = self.opponent.noise
            return {int(m): noise / len(legal) + (1 - noise) * inner.get(int(m), 0.0) for m in legal}
        counts: dict[int, int] = {}
        for _ in range(self.samples):
            move = int(self.opponent.act(state, self.rng))
            counts[move] = counts.get(move, 0) + 1
        return {m: c / self.samples for m, c in sorted(counts.items())}


class BestResponse:
    """The expectimax policy against one opponent from one seat.

    ``value`` is (win, draw, loss) from the empty board under the opponent's
    distributions. A position the search never reached (an MCTS move outside
    the sampled support) is searched when first met, so ``act`` always answers.
    """

    def __init__(
        self,
        distribution: Callable[[TicTacToeState], dict[int, float]],
        agent_seat: int,
        objective: Objective = "win",
    ) -> None:
        if agent_seat not in (0, 1) or isinstance(agent_seat, bool):
            raise ValueError(f"agent_seat must be 0 (X) or 1 (O), got {agent_seat!r}")
        if objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
        self.distribution = distribution
        self.agent_seat = agent_seat
        self.objective: Objective = objective
        self._memo: dict[tuple[int, ...], Outcome3] = {}
        self.policy: dict[tuple[int, ...], int] = {}
        self.value: Outcome3 = self.evaluate(initial_state())

    def act(self, state: TicTacToeState) -> int:
        if state.to_move != self.agent_seat:
            raise ValueError(f"board {state.board} is not the agent's (seat {self.agent_seat}) to move")
        if state.board not in self.policy:
            self.evaluate(state)
        return self.policy[state.board]

    def evaluate(self, state: TicTacToeState) -> Outcome3:
        """(win, draw, loss) from ``state`` under the best response."""
        key = state.board
        found = self._memo.get(key)
        if found is not None:
            return found
        if state.is_terminal():
            winner = state.winner()
            result: Outcome3 = ((0.0, 1.0, 0.0) if winner is None else
                                (1.0, 0.0, 0.0) if winner == self.agent_seat else (0.0, 0.0, 1.0))
        elif state.to_move == self.agent_seat:
            best_move, result = -1, (0.0, 0.0, 1.0)
            best_score = (-math.inf, -math.inf)
            moves = state.legal_moves()
            if self.objective == "safe":
                values = move_values(state)
                best_value = max(values.values())
                moves = tuple(m for m in moves if values[m] == best_value)
            for move in moves:
                child = self.evaluate(state.apply(move))
                score = _score(child, self.objective)
                if score > best_score:
                    best_move, result, best_score = int(move), child, score
            self.policy[key] = best_move
        else:
            win = draw = loss = 0.0
            for move, p in self.distribution(state).items():
                w, d, lo = self.evaluate(state.apply(move))
                win, draw, loss = win + p * w, draw + p * d, loss + p * lo
            result = (win, draw, loss)
        self._memo[key] = result
        return result


def best_response(
    distribution: Callable[[TicTacToeState], dict[int, float]],
    agent_seat: int,
    objective: Objective = "win",
) -> BestResponse:
    """Expectimax from the empty board; the agent holds X in seat 0, O in seat 1."""
    return BestResponse(distribution, agent_seat, objective)


@dataclass(frozen=True)
class Played:
    games: int
    wins: int
    draws: int
    losses: int

    @property
    def win_rate(self) -> float:
        return self.wins / self.games

    @property
    def not_loss_rate(self) -> float:
        return (self.wins + self.draws) / self.games

    def win_interval(self) -> tuple[float, float]:
        """Wilson 95% interval of the win rate."""
        return _wilson(self.wins, self.games)


def _wilson(successes: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def play(response: BestResponse, opponent: object, games: int, rng: np.random.Generator) -> Played:
    """Play the best response against the real opponent ``games`` times."""
    if not isinstance(games, int) or isinstance(games, bool) or games < 1:
        raise ValueError(f"games must be an int >= 1, got {games!r}")
    check_generator(rng, "play")
    wins = draws = losses = 0
    for _ in range(games):
        state = initial_state()
        while not state.is_terminal():
            if state.to_move == response.agent_seat:
                state = state.apply(response.act(state))
            else:
                state = state.apply(int(opponent.act(state, rng)))
        winner = state.winner()
        if winner is None:
            draws += 1
        elif winner == response.agent_seat:
            wins += 1
        else:
            losses += 1
    return Played(games, wins, draws, losses)
