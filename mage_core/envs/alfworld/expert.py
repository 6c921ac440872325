"""ALFWorld's expert: the first command of TextWorld's planner from the current state.

The planner knows where every object is, so it walks straight to them: a demonstration
of what to do, not of how to search. It needs the engine to plan after every step
(``AlfWorldSettings(planner=True)``, which ``Task.expert_settings`` asks for)."""

from __future__ import annotations

import numpy as np

from mage_core.envs.alfworld.env import AlfWorldEnv


def act(env: AlfWorldEnv, rng: np.random.Generator) -> str:
    """The planner's next command when it is admissible; otherwise (no plan from here) a
    uniformly drawn admissible one."""
    legal = env.legal_actions()
    plan = env.planner_commands()
    if plan and plan[0] in legal:
        return plan[0]
    return legal[int(rng.integers(len(legal)))]
