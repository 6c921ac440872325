"""ALFWorld's experts: one that searches (``act``, the demonstrations') and one that knows
where everything is (``omniscient``, TextWorld's planner).

``act`` reads only what a player reads (``knowledge``): the goal's text, the room's
receptacles, what its looks showed and what earlier attempts of the same game revealed (its
memory: ``saw`` mug 1 in cabinet 2, ``empty`` drawer 1). It fetches an object of the goal's
class from where it knows one to be; where it knows none it searches: the receptacles not yet
looked into that ALFWorld's own priors say can hold that class (``VAL_RECEPTACLE_OBJECTS``;
every receptacle for a lamp), those it sees into on arrival before those it must open, in the
room's order. Then it cleans, heats or cools the object where the goal says so, and puts it in
the first receptacle of the target class (a second object likewise; for a ``look`` goal it
finds a lamp and uses it while holding the object). Within the turn limit (10) the search of
a first attempt often runs out; a later attempt of a replayed game goes straight to what its
memory saw, or searches where the earlier ones did not. That gain is what imitation can hand
down (``mage sft`` prints it).

``omniscient`` is the first command of the planner's shortest plan (the expert of the
demonstrations before issue 41): it needs ``AlfWorldSettings(planner=True)`` and costs up to
tens of seconds a step on large kitchens.
"""

from __future__ import annotations

import functools
from typing import Sequence

import numpy as np

from mage_core.envs.alfworld.env import AlfWorldEnv
from mage_core.envs.alfworld.knowledge import APPLIANCES, KINDS, SAW, Goal, Knowledge, kind_of, parse_goal
from mage_core.envs.base import Revealed, checked_memory


@functools.lru_cache(maxsize=1)
def _priors() -> dict[str, frozenset[str]]:
    """Object class -> the receptacle classes ALFWorld's scenes may put it in (lower case)."""
    import alfworld.gen.constants as constants

    holds: dict[str, set[str]] = {}
    for recep, objects in constants.VAL_RECEPTACLE_OBJECTS.items():
        for obj in objects:
            holds.setdefault(obj.lower(), set()).add(recep.lower())
    return {obj: frozenset(receps) for obj, receps in holds.items()}


@functools.lru_cache(maxsize=1)
def _openable() -> frozenset[str]:
    """The receptacle classes a player opens before it can see inside (lower case)."""
    import alfworld.gen.constants as constants

    return frozenset(c.lower() for c in constants.OPENABLE_CLASS_LIST)


def remembered(env: AlfWorldEnv, memory: Sequence[Revealed]) -> list[tuple[str, str]]:
    """The facts of ``memory``, checked against the game ``env`` plays: a memory of another game,
    a kind ALFWorld does not reveal, or a receptacle the room does not have is a ValueError of
    one line naming it."""
    facts: list[tuple[str, str]] = []
    receptacles = set(env.receptacles())
    for attempt, item in checked_memory(memory, env.task_key(), KINDS, "ALFWorld expert", "game"):
        for kind, subject in item.facts:
            saw = SAW.fullmatch(subject) if kind == "saw" else None
            if kind == "saw" and saw is None:
                raise ValueError(f"ALFWorld expert: memory item {attempt} has {subject!r}, "
                                 "not 'OBJECT N in RECEPTACLE N'")
            recep = saw.group(2) if saw else subject
            if recep not in receptacles:
                raise ValueError(f"ALFWorld expert: memory item {attempt} names receptacle {recep!r} ({subject!r}), "
                                 f"not one of this room's {len(receptacles)}")
            facts.append((kind, subject))
    return facts


def act(env: AlfWorldEnv, rng: np.random.Generator, memory: Sequence[Revealed] = ()) -> str | None:
    """The searching expert's next command (module docstring); None where it has none that the
    game admits (``play_expert`` then steps at random, as a detour)."""
    goal = parse_goal(env.task)
    if goal is None:
        raise ValueError(f"ALFWorld expert: the goal {env.task!r} of {env.game} matches none of ALFWorld's templates")
    know = Knowledge.of(env.receptacles(), env.steps(), remembered(env, memory))
    command = next_command(goal, know, env.legal_actions())
    return command if command in env.legal_actions() else None


def next_command(goal: Goal, know: Knowledge, legal: Sequence[str]) -> str | None:
    """What to do next towards ``goal`` given ``know`` (``legal``: the admissible commands, read
    only to see whether the receptacle here is closed)."""
    held = [o for o in know.holding if kind_of(o) == goal.obj]
    stray = [o for o in know.holding if kind_of(o) != goal.obj]
    if stray:  # holding something else (after a detour): put it down here
        return f"move {stray[0]} to {know.at}" if know.at else None
    if goal.kind == "look":
        if not held:
            return _fetch(goal.obj, goal, know, legal)
        lamps = [o for o in know.where if kind_of(o) == goal.target]
        if not lamps:
            return _search(goal.target, know, legal)
        if know.at != know.where[lamps[0]]:
            return f"go to {know.where[lamps[0]]}"
        return f"use {lamps[0]}"
    if not held:
        return _fetch(goal.obj, goal, know, legal)
    obj = held[0]
    if goal.kind in APPLIANCES and obj not in know.transformed:
        appliance = next((r for cls in APPLIANCES[goal.kind] for r in know.of_class(cls)), None)
        if appliance is None:
            return None
        return f"go to {appliance}" if know.at != appliance else f"{goal.kind} {obj} with {appliance}"
    targets = know.of_class(goal.target)
    if not targets:
        return None
    target = know.at if know.at in targets else targets[0]
    if know.at != target:
        return f"go to {target}"
    if f"open {target}" in legal:
        return f"open {target}"
    return f"move {obj} to {target}"


def _fetch(cls: str, goal: Goal, know: Knowledge, legal: Sequence[str]) -> str | None:
    """Take an object of class ``cls`` from where one is known to be (not one already in a
    receptacle of the goal's target class), else search for one."""
    known = [o for o, r in know.where.items() if kind_of(o) == cls and kind_of(r) != goal.target]
    if not known:
        return _search(cls, know, legal)
    here = [o for o in known if know.where[o] == know.at]
    obj = here[0] if here else known[0]
    recep = know.where[obj]
    if know.at != recep:
        return f"go to {recep}"
    if f"open {recep}" in legal:
        return f"open {recep}"
    return f"take {obj} from {recep}"


def _search(cls: str, know: Knowledge, legal: Sequence[str]) -> str | None:
    """Look into the receptacle here if it is closed and unseen, else go to the next one to
    search for class ``cls`` (module docstring); None when every one has been looked into."""
    if know.at is not None and know.at not in know.looked and f"open {know.at}" in legal:
        return f"open {know.at}"
    prior = _priors().get(cls)
    order = [r for r in know.receptacles if r not in know.looked and (prior is None or kind_of(r) in prior)]
    order.sort(key=lambda r: kind_of(r) in _openable())  # stable: the room's order within each group
    return f"go to {order[0]}" if order else None


def omniscient(env: AlfWorldEnv, rng: np.random.Generator, memory: Sequence[Revealed] = ()) -> str | None:
    """The planner's next command; None when it finds no way to the goal from here. A first
    command the game does not admit is an error naming the game and turn. The memory is not
    read: the planner knows where every object is."""
    plan = env.planner_commands()
    if plan and plan[0] not in env.legal_actions():
        raise RuntimeError(f"ALFWorld's expert: the planner's first command {plan[0]!r} is not admissible in "
                           f"{env.game} at turn {env.turn}")
    return plan[0] if plan else None
