"""Tasks by name, imported on demand (a dict literal, docs/architecture.md, style rule 4).

Adding an environment: its folder under ``mage_core/envs/`` declares a ``TASK``
(``mage_core.envs.task.Task``) in ``task.py``, and one line here names that module.
Everything else reads the task through ``task(name)``.
"""

from __future__ import annotations

import importlib
from functools import cache
from typing import TYPE_CHECKING, Any

from mage_core.envs.task import Task

if TYPE_CHECKING:
    import numpy as np

    from mage_core.envs.base import Env, GameState, Opponent

#: task name -> module declaring its ``TASK``, in the order reports list them.
TASKS = {
    "tic_tac_toe": "mage_core.envs.tic_tac_toe.task",
    "kuhn_poker": "mage_core.envs.kuhn_poker.task",
    "sokoban": "mage_core.envs.sokoban.task",
    "webshop": "mage_core.envs.webshop.task",
    "alfworld": "mage_core.envs.alfworld.task",
    "minesweeper": "mage_core.envs.minesweeper.task",
}
#: Every task's name, in registry order.
GAMES = tuple(TASKS)


@cache
def task(name: str) -> Task:
    """The task called ``name``; ValueError listing the known ones otherwise."""
    if name not in TASKS:
        raise ValueError(f"unknown game {name!r}; choose one of {', '.join(TASKS)}")
    declared = importlib.import_module(TASKS[name]).TASK
    if declared.name != name:
        raise RuntimeError(f"{TASKS[name]} declares the task {declared.name!r}, registered as {name!r}")
    return declared


def two_player_games() -> tuple[str, ...]:
    """The games with opponents and seats, in registry order."""
    return tuple(games_with("two_player"))


def games_with(capability: str) -> list[str]:
    """The tasks that declare ``capability`` (a field or property of ``Task``, declared when
    truthy: a flag such as ``draws`` or ``scored``, or a group of hooks such as
    ``exact_values``, ``strategy_probes``, ``data``, ``analyze``), in registry order."""
    return [name for name in TASKS if getattr(task(name), capability)]


def initial_state(game: str, rng: np.random.Generator) -> GameState:
    """A new initial state of a two-player game (Kuhn Poker draws the deal)."""
    new_game = task(game).new_game if game in TASKS else None
    if new_game is None:
        raise ValueError(f"{game!r} is not a two-player game; choose one of {', '.join(two_player_games())}")
    return new_game(rng)


def is_single_agent(game: str) -> bool:
    """A task without an opponent (Sokoban, WebShop, ALFWorld): no population, no seats."""
    return not task(game).two_player


def resolve(dotted: str) -> Any:
    """The object a ``"module:attribute"`` reference names."""
    module, _, attribute = dotted.partition(":")
    return getattr(importlib.import_module(module), attribute)


def make_env(
    game: str,
    settings: Any,
    rng: np.random.Generator,
    opponent: Opponent | None = None,
    agent_seat: int = 0,
) -> Env:
    """The agent environment of ``game``; two-player games need an opponent.

    ``settings`` is the game's settings (``envs.params.EnvSettings``: ``Config.env.<game>``, or one
    built or ``replace``d in code).
    """
    spec = task(game)
    cls = resolve(spec.env_class)
    if spec.two_player:
        if opponent is None:
            raise ValueError(f"{game} is a two-player game: make_env needs an opponent")
        if agent_seat not in (0, 1):
            raise ValueError(f"agent_seat must be 0 (moves first) or 1, got {agent_seat!r}")
        return cls(settings, opponent, agent_seat, rng)
    if opponent is not None:
        raise ValueError(f"{game} is a single-agent task: it takes no opponent")
    return cls(settings, rng)
