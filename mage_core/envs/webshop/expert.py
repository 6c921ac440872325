"""WebShop's expert for a constrained policy: the scripted shopper, whose search is
the one search a constrained policy may issue (the instruction)."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from mage_core.envs.base import Revealed
from mage_core.envs.webshop.env import WebShopEnv, expert_action


def act(env: WebShopEnv, rng: np.random.Generator, memory: Sequence[Revealed] = ()) -> str:
    """On the search page the instruction's search (``search_action``: the goal product is then
    among the results); elsewhere ``expert_action``: page to the goal product, open it,
    choose the goal's options, buy. The memory of earlier attempts is not read: this shopper
    knows the goal product."""
    if env.page == "search":
        return env.search_action()
    action = expert_action(env)
    if action is None:
        raise RuntimeError("the WebShop expert was asked to act in a finished episode")
    return action
