"""What an ALFWorld player can know without the game's hidden state (issue 41).

Three sources, all of them text a player reads: the goal (one of ALFWorld's twelve goal
templates, ``alfworld.gen.goal_library``), the receptacles the room description names, and
what each look showed ("On the countertop 1, you see a mug 1, and a knife 2.", "The cabinet
2 is open. In it, you see nothing."). ``Knowledge.of`` folds the commands an attempt took,
with their feedback, and the facts earlier attempts revealed (``envs.base.Revealed``: ``saw``
"mug 1 in cabinet 2", ``empty`` "drawer 1") into where things are believed to be, what the
player holds and what it has heated, cooled or cleaned. The searching expert
(``expert.act``) acts on nothing else; ``first_looks`` is what ``AlfWorldEnv.revealed``
reports of an attempt.

A replayed game starts from the same state, so what an earlier attempt saw at its first
look into a receptacle is where things are at the start of the next one; objects the
attempt had already picked up before a look are left out of it (they were not there at the
start).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, Sequence

#: The kinds of fact an ALFWorld attempt reveals (``AlfWorldEnv.revealed``).
KINDS = ("saw", "empty")
#: The appliance each transforming goal needs, in the order tried (ALFWorld uses a bathtub
#: basin where a room has no sink basin).
APPLIANCES = {"clean": ("sinkbasin", "bathtubbasin"), "heat": ("microwave",), "cool": ("fridge",)}

_NAME = r"[a-z]+ \d+"
_ON = re.compile(rf"On the ({_NAME}), you see (.+?)\.(?:\s|$)")
_IN = re.compile(rf"The ({_NAME}) is open\. In it, you see (.+?)\.(?:\s|$)")
_ROOM = re.compile(r"Looking quickly around you, you see (.+?)\.(?:\s|$)")
_TAKE = re.compile(rf"^take ({_NAME}) from ({_NAME})$")
_MOVE = re.compile(rf"^move ({_NAME}) to ({_NAME})$")
TRANSFORM = re.compile(rf"^(clean|heat|cool) ({_NAME}) with ({_NAME})$")
SAW = re.compile(rf"^({_NAME}) in ({_NAME})$")
#: ALFWorld's goal templates (goal_library.py), the specific ones before ``put a X in Y``.
_GOALS = (
    (re.compile(r"^(?:put a clean (\w+) in|clean some (\w+) and put it in) (\w+)$"), "clean"),
    (re.compile(r"^(?:put a hot (\w+) in|heat some (\w+) and put it in) (\w+)$"), "heat"),
    (re.compile(r"^(?:put a cool (\w+) in|cool some (\w+) and put it in) (\w+)$"), "cool"),
    (re.compile(r"^(?:put two (\w+) in|find two (\w+) and put them in) (\w+)$"), "two"),
    (re.compile(r"^(?:look at (\w+) under the|examine the (\w+) with the) (\w+)$"), "look"),
    (re.compile(r"^(?:put a (\w+) in|put some (\w+) on) (\w+)$"), "place"),
)


def kind_of(name: str) -> str:
    """An object's or receptacle's class: its name without the number (``mug 1`` -> ``mug``)."""
    return name.rsplit(" ", 1)[0]


def names(listing: str) -> list[str]:
    """``a bread 2, a cup 1, and a egg 2`` -> ``["bread 2", "cup 1", "egg 2"]``; ``nothing`` -> []."""
    if listing.strip() == "nothing":
        return []
    found = []
    for part in listing.split(","):
        part = part.strip()
        part = part[4:] if part.startswith("and ") else part
        part = part.split(" ", 1)[1] if part.split(" ", 1)[0] in ("a", "an") else part
        if re.fullmatch(_NAME, part):
            found.append(part)
    return found


def room(intro: str) -> tuple[str, ...]:
    """The receptacles the room description names, in its order."""
    match = _ROOM.search(intro)
    return tuple(names(match.group(1))) if match else ()


def looked(feedback: str) -> tuple[str, list[str]] | None:
    """The receptacle a feedback shows the inside or top of, and what it holds; None if it shows none."""
    match = _ON.search(feedback) or _IN.search(feedback)
    return (match.group(1), names(match.group(2))) if match else None


@dataclass(frozen=True)
class Goal:
    """A goal read from its text: ``kind`` (place, clean, heat, cool, two, look: the transforming
    kinds are also the command's verb, ``heat mug 1 with microwave 1``), the object
    class to fetch, and the target receptacle class (or, for ``look``, the lamp's class)."""

    kind: str
    obj: str
    target: str


def parse_goal(text: str) -> Goal | None:
    """The goal of ``text`` (a task line such as "put a hot mug in coffeemachine."); None if no
    template of ALFWorld's matches it."""
    text = " ".join(text.lower().split()).rstrip(".")
    for pattern, kind in _GOALS:
        match = pattern.match(text)
        if match:
            obj = match.group(1) or match.group(2)
            return Goal(kind, obj, match.group(3))
    return None


def first_looks(steps: Sequence[tuple[str, str]]) -> list[tuple[str, list[str]]]:
    """Each receptacle an attempt looked into or onto, at its first look, with what it held then
    (objects the attempt had picked up before that look left out), in the order looked."""
    seen: dict[str, list[str]] = {}
    handled: set[str] = set()
    for action, feedback in steps:
        took = _TAKE.match(action)
        if took:
            handled.add(took.group(1))
        look = looked(feedback)
        if look is not None and look[0] not in seen:
            seen[look[0]] = [o for o in look[1] if o not in handled]
    return list(seen.items())


@dataclass
class Knowledge:
    """What a player knows at a step (module docstring)."""

    receptacles: tuple[str, ...]
    at: str | None = None
    holding: list[str] = field(default_factory=list)
    where: dict[str, str] = field(default_factory=dict)  # object -> receptacle believed to hold it
    looked: set[str] = field(default_factory=set)  # receptacles whose contents are known
    opened: set[str] = field(default_factory=set)  # opened in this attempt (and not closed since)
    transformed: set[str] = field(default_factory=set)  # cleaned, heated or cooled in this attempt

    @classmethod
    def of(cls, receptacles: Sequence[str], steps: Iterable[tuple[str, str]],
           remembered: Iterable[tuple[str, str]] = ()) -> "Knowledge":
        """Fold ``remembered`` facts (``(kind, subject)`` of earlier attempts, checked by the
        caller) and then this attempt's ``steps`` (command, feedback; admitted commands only)."""
        know = cls(tuple(receptacles))
        for kind, subject in remembered:
            if kind == "empty":
                know.looked.add(subject)
            else:
                obj, recep = SAW.match(subject).groups()  # type: ignore[union-attr]
                know.where.setdefault(obj, recep)
                know.looked.add(recep)
        for action, feedback in steps:
            know._step(action, feedback)
        return know

    def _step(self, action: str, feedback: str) -> None:
        if action.startswith("go to "):
            self.at = action[len("go to "):]
        elif action.startswith("open "):
            self.opened.add(action[len("open "):])
        elif action.startswith("close "):
            self.opened.discard(action[len("close "):])
        elif took := _TAKE.match(action):
            self.holding.append(took.group(1))
            self.where.pop(took.group(1), None)
        elif moved := _MOVE.match(action):
            obj, recep = moved.groups()
            if obj in self.holding:
                self.holding.remove(obj)
            self.where[obj] = recep
        elif changed := TRANSFORM.match(action):
            self.transformed.add(changed.group(2))
        look = looked(feedback)
        if look is not None:
            recep, objects = look
            self.looked.add(recep)
            for obj, place in list(self.where.items()):
                if place == recep and obj not in objects:
                    del self.where[obj]  # not there (any more)
            for obj in objects:
                if obj not in self.holding:
                    self.where[obj] = recep

    def of_class(self, cls: str) -> list[str]:
        """The receptacles of a class, in the room's order."""
        return [r for r in self.receptacles if kind_of(r) == cls]
