"""Games by name, imported on demand (a dict literal, DESIGN.md style rule 4)."""

from __future__ import annotations

import importlib

import numpy as np

from mage_core.envs.base import GameState

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
