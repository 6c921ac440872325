"""Every game and opponent, for the contract, fuzz and golden tests."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mage_core.config import Config
from mage_core.envs.base import Env
from mage_core.envs.registry import GAMES, is_single_agent, make_env, task
from mage_core.opponents.registry import OpponentSettings, make_opponent

CONFIG = Config()
OPPONENT_SETTINGS = OpponentSettings(
    cfr_iterations=300,  # enough for a valid strategy; keeps the suite fast
    kuhn_strategies={"all_in": {k: 1.0 for k in ("J", "Q", "K", "Jpb", "Qpb", "Kpb", "Jp", "Qp", "Kp",
                                                 "Jb", "Qb", "Kb")}},
)

OPPONENTS = {
    "tic_tac_toe": ["random", "minimax", "mcts-25", "pattern-center_corners_edges", "pattern-corners",
                    "pattern-edges", "pattern-diagonal", "pattern-anti_diagonal", "pattern-corners_bottom_right"],
    "kuhn_poker": ["random", "conservative", "aggressive", "intermediate", "equilibrium-1/6", "cfr",
                   "cfr_argmax", "all_in"],
}
#: Opponents whose every move is a function of the state (no sampling).
DETERMINISTIC = {"pattern-center_corners_edges", "pattern-corners", "pattern-edges", "pattern-diagonal",
                 "pattern-anti_diagonal", "pattern-corners_bottom_right", "conservative", "aggressive",
                 "intermediate", "cfr_argmax", "all_in"}


@dataclass(frozen=True)
class Case:
    game: str
    opponent: str | None
    agent_seat: int

    @property
    def id(self) -> str:
        return f"{self.game}-{self.opponent}-seat{self.agent_seat}" if self.opponent else self.game

    def build(self, seed: int) -> Env:
        rng = np.random.default_rng(seed)
        settings = getattr(CONFIG.env, self.game)
        opponent = make_opponent(self.game, self.opponent, OPPONENT_SETTINGS) if self.opponent else None
        return make_env(self.game, settings, rng, opponent, self.agent_seat)


#: Every two-player game against each opponent in both seats, and every single-agent task
#: that needs no data files (the registry's: a new environment is covered by adding it there).
CASES = [Case(g, o, s) for g, names in OPPONENTS.items() for o in names for s in (0, 1)] + [
    Case(g, None, 0) for g in GAMES if is_single_agent(g) and task(g).data is None
]
