"""Games by name, imported on demand (a dict literal, DESIGN.md style rule 4)."""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np

from mage_core.envs.base import Env, GameState, Opponent

#: game name -> module holding its rules (each exposes ``initial_state``).
RULES = {
    "tic_tac_toe": "mage_core.envs.tic_tac_toe.rules",
    "kuhn_poker": "mage_core.envs.kuhn_poker.rules",
}


def initial_state(game: str, rng: np.random.Generator) -> GameState:
    """A new initial state of a two-player game (Kuhn Poker draws the deal)."""
    if game not in RULES:
        raise ValueError(f"{game!r} is not a two-player game; choose one of {', '.join(RULES)}")
    module = importlib.import_module(RULES[game])
    if game == "kuhn_poker":
        return module.initial_state(rng)
    return module.initial_state()


#: game name -> (module, class) of its agent environment.
ENVS = {
    "tic_tac_toe": ("mage_core.envs.tic_tac_toe.env", "TicTacToeEnv"),
    "kuhn_poker": ("mage_core.envs.kuhn_poker.env", "KuhnPokerEnv"),
    "sokoban": ("mage_core.envs.sokoban.env", "SokobanEnv"),
    "webshop": ("mage_core.envs.webshop.env", "WebShopEnv"),
    "alfworld": ("mage_core.envs.alfworld.env", "AlfWorldEnv"),
}


def is_single_agent(game: str) -> bool:
    """A task without an opponent (Sokoban, WebShop, ALFWorld): no population, no seats."""
    return game not in RULES


def make_env(
    game: str,
    settings: Any,
    rng: np.random.Generator,
    opponent: Opponent | None = None,
    agent_seat: int = 0,
) -> Env:
    """The agent environment of ``game``; two-player games need an opponent.

    ``settings`` is the game's settings dataclass (``Config.env.<game>.settings()``).
    """
    if game not in ENVS:
        raise ValueError(f"unknown game {game!r}; choose one of {', '.join(ENVS)}")
    module, name = ENVS[game]
    cls = getattr(importlib.import_module(module), name)
    if game in RULES:
        if opponent is None:
            raise ValueError(f"{game} is a two-player game: make_env needs an opponent")
        if agent_seat not in (0, 1):
            raise ValueError(f"agent_seat must be 0 (moves first) or 1, got {agent_seat!r}")
        return cls(settings, opponent, agent_seat, rng)
    if opponent is not None:
        raise ValueError(f"{game} is a single-agent task: it takes no opponent")
    return cls(settings, rng)
