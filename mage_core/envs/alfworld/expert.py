"""ALFWorld's expert: the first command of TextWorld's planner from the current state.

The planner knows where every object is, so it walks straight to them: a demonstration
of what to do, not of how to search. It needs the planner (``AlfWorldSettings(planner=True)``,
which ``Task.expert_settings`` asks for)."""

from __future__ import annotations

import numpy as np

from mage_core.envs.alfworld.env import AlfWorldEnv


def act(env: AlfWorldEnv, rng: np.random.Generator) -> str:
    """The planner's next command. No plan, or a first command the game does not admit, is
    an error naming the game and turn: a random command passed off as the expert's would be
    cloned as one."""
    plan = env.planner_commands()
    if not plan or plan[0] not in env.legal_actions():
        found = f"its first command {plan[0]!r} is not admissible" if plan else "it finds no way to the goal"
        raise RuntimeError(f"ALFWorld's expert: the planner cannot act in {env.game} at turn {env.turn}: {found}")
    return plan[0]
