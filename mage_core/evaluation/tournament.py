"""Head-to-head matches between two players of a two-player game.

Seats alternate (player A moves first in even-numbered games), and every game
draws its randomness from its own seed sequence ``(seed, game_index)`` split
into the chance stream (Kuhn deals) and one stream per player. So the same
seed deals the same Kuhn hands to every match-up (common random numbers), and
a match is reproducible game by game.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from mage_core.envs.base import GameState, Opponent
from mage_core.evaluation.stats import mean_interval, wilson_interval


@dataclass
class MatchResult:
    """Outcomes from player A's point of view."""

    player_a: str
    player_b: str
    game: str
    payoffs: list[float] = field(default_factory=list)  # A's payoff per game (native units)
    seats: list[int] = field(default_factory=list)  # A's seat per game

    @property
    def num_games(self) -> int:
        return len(self.payoffs)

    def counts(self, seat: int | None = None) -> tuple[int, int, int]:
        """(wins, draws, losses) of A, optionally for one of A's seats."""
        pays = [p for p, s in zip(self.payoffs, self.seats) if seat is None or s == seat]
        return sum(p > 0 for p in pays), sum(p == 0 for p in pays), sum(p < 0 for p in pays)

    def summary(self) -> dict[str, float]:
        """Rates with 95% Wilson intervals and A's mean payoff with its interval."""
        n = self.num_games
        wins, draws, losses = self.counts()
        out: dict[str, float] = {"num_games": float(n)}
        for name, k in (("win", wins), ("draw", draws), ("loss", losses)):
            low, high = wilson_interval(k, n)
            out[f"{name}_rate"] = k / n
            out[f"{name}_rate_low"], out[f"{name}_rate_high"] = low, high
        mean, low, high = mean_interval(self.payoffs)
        out["mean_payoff"], out["mean_payoff_low"], out["mean_payoff_high"] = mean, low, high
        for seat in (0, 1):
            w, d, l = self.counts(seat)
            total = w + d + l
            if total:
                out[f"seat{seat}/win_rate"] = w / total
                out[f"seat{seat}/loss_rate"] = l / total
        return out


def play_game(
    state: GameState,
    players: tuple[Opponent, Opponent],
    rngs: tuple[np.random.Generator, np.random.Generator],
) -> tuple[float, float]:
    """Play from ``state`` to the end; returns both players' payoffs."""
    while not state.is_terminal():
        seat = state.to_move
        move = players[seat].act(state, rngs[seat])
        state = state.apply(move)
    return state.returns()


def play_match(
    game: str,
    initial_state: Callable[[np.random.Generator], GameState],
    player_a: Opponent,
    player_b: Opponent,
    num_games: int,
    seed: int,
    on_game: Callable[[], None] | None = None,
) -> MatchResult:
    """``num_games`` games with alternating seats, reproducible from ``seed``."""
    if num_games < 1:
        raise ValueError(f"num_games must be >= 1, got {num_games}")
    result = MatchResult(player_a.name, player_b.name, game)
    for i in range(num_games):
        chance, rng_a, rng_b = (np.random.default_rng(s) for s in np.random.SeedSequence([seed, i]).spawn(3))
        seat_a = i % 2
        players = (player_a, player_b) if seat_a == 0 else (player_b, player_a)
        rngs = (rng_a, rng_b) if seat_a == 0 else (rng_b, rng_a)
        payoffs = play_game(initial_state(chance), players, rngs)
        result.payoffs.append(float(payoffs[seat_a]))
        result.seats.append(seat_a)
        if on_game is not None:
            on_game()
    return result
