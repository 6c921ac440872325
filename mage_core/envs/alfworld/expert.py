"""ALFWorld's expert: the first command of TextWorld's planner from the current state.

The planner knows where every object is, so it walks straight to them: a demonstration
of what to do, not of how to search. It needs the planner (``AlfWorldSettings(planner=True)``,
which ``Task.expert_settings`` asks for)."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from mage_core.envs.base import Revealed
from mage_core.envs.alfworld.env import AlfWorldEnv


def act(env: AlfWorldEnv, rng: np.random.Generator, memory: Sequence[Revealed] = ()) -> str | None:
    """The planner's next command; None when it finds no way to the goal from here (``play_expert``
    then steps at random, as a detour). A first command the game does not admit is an error
    naming the game and turn. The memory of earlier attempts is not read: the planner knows
    where every object is."""
    plan = env.planner_commands()
    if plan and plan[0] not in env.legal_actions():
        raise RuntimeError(f"ALFWorld's expert: the planner's first command {plan[0]!r} is not admissible in "
                           f"{env.game} at turn {env.turn}")
    return plan[0] if plan else None
