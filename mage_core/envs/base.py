"""What every game offers the rest of the library.

Two layers, kept apart on purpose:

1. *Rules*: immutable game states with integer moves (``GameState``). Opponents,
   solvers and tournaments work here; nothing in this layer knows about text.
2. *Agent environments* (``Env``): one game against one opponent from the agent's
   seat, with a text observation, a text action parser, task rewards and an exact
   ``restart()`` to the episode's initial state (docs/method.md section 1).

Randomness is always a ``numpy.random.Generator`` passed in; no global seeding.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Protocol, Sequence, runtime_checkable

import numpy as np

#: ``to_move`` of a state whose next event is a chance draw (e.g. a card deal).
CHANCE = -1
#: ``to_move`` of a terminal state.
TERMINAL = -2


class Outcome(str, enum.Enum):
    """How an episode ended, from the agent's point of view."""

    WIN = "win"  # two-player win, or a single-player task solved
    LOSS = "loss"
    DRAW = "draw"  # the game itself ended level (Tic-Tac-Toe full board)
    TIMEOUT = "timeout"  # the turn limit ended the episode before the game did


@runtime_checkable
class GameState(Protocol):
    """An immutable two-player game state with integer moves."""

    @property
    def to_move(self) -> int:
        """0 or 1 for the player to act, ``CHANCE`` or ``TERMINAL``."""
        ...

    def legal_moves(self) -> Sequence[int]:
        """The legal moves of the player to act, in a fixed order."""
        ...

    def apply(self, move: int) -> "GameState":
        """A new state after ``move``; ``self`` is unchanged."""
        ...

    def is_terminal(self) -> bool: ...

    def returns(self) -> tuple[float, float]:
        """Payoffs of players 0 and 1 at a terminal state, in the game's native
        units (Tic-Tac-Toe: +1/-1/0; Kuhn Poker: chips)."""
        ...

    def key(self) -> Hashable:
        """A hashable identity of the full state (for transposition tables)."""
        ...


@runtime_checkable
class Opponent(Protocol):
    """A fixed (stationary) policy for one seat of a two-player game.

    ``act`` must only use what the acting player may observe (in Kuhn Poker: its
    own card and the betting so far). ``rng`` carries all of its randomness.
    """

    name: str

    def act(self, state: GameState, rng: np.random.Generator) -> int: ...


@dataclass(frozen=True)
class StepResult:
    """What one agent turn produced.

    ``reward`` is the task reward of this turn only (penalties are computed by
    ``mage_core.envs.rewards`` from ``invalid`` and the response length), in the
    reward units of the env's settings. For Sokoban it sums every primitive move.
    """

    reward: float
    done: bool
    invalid: bool
    outcome: Outcome | None = None  # set when ``done``
    info: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Env(Protocol):
    """One episode of a task from the agent's seat (docs/method.md sections 1-3).

    Life cycle: ``reset()`` draws a new initial state from the env's generator;
    ``restart()`` returns to exactly that initial state (the same board, deal or
    level) for the next episode of a meta-episode; ``step`` plays one agent turn,
    including the opponent's replies. An invalid action (``None``) earns no task
    reward, counts against the turn limit, and the opponent does not move; but an
    episode that the turn limit ends after an invalid turn pays, on its last turn,
    what brings its task-reward total down to ``legal_return_floor()`` (stalling
    never pays more than the worst legal outcome; docs/rewards.md).
    """

    name: str

    def reset(self) -> None: ...

    def restart(self) -> None: ...

    def observation(self) -> str:
        """What the agent sees now, without the history of earlier turns; exact
        text equality of observations defines GiGPO's anchor states."""
        ...

    def compact_observation(self) -> str:
        """The same state in few tokens (prompt style ``compact``, for small
        models trained from scratch); at the end of an episode it includes the
        result."""
        ...

    def legal_actions(self) -> list[str]:
        """Canonical action texts accepted now (what goes inside <action>)."""
        ...

    def compact_action(self, action: str) -> str:
        """A canonical action as the ONE word a compact-style policy answers with
        (a single token of the embedded tokenizer: a constrained choice is then
        read at one position)."""
        ...

    def parse_action(self, response: str) -> str | None:
        """The canonical legal action in a model response, or None if invalid.
        Never raises, whatever the text."""
        ...

    def step(self, action: str | None) -> StepResult: ...

    def legal_return_floor(self) -> float:
        """A lower bound on the task-reward total that legal play of the current
        episode can earn (its worst legal outcome, or below it); what an episode
        stalled into the turn limit by invalid turns pays at most."""
        ...

    @property
    def done(self) -> bool: ...

    @property
    def turn(self) -> int:
        """Agent turns taken in this episode (valid or not)."""
        ...


@runtime_checkable
class FiniteSplit(Protocol):
    """An env whose tasks are a fixed list (WebShop's goals, ALFWorld's games): an
    evaluation set plays each of them once (``reset_to``), where training draws them
    with replacement (``reset``). Envs that make a new task from every seed (Sokoban's
    levels, MineSweeper's boards) are not."""

    def split_size(self) -> int:
        """How many distinct tasks the split holds."""
        ...

    def reset_to(self, index: int) -> None:
        """``reset`` to the split's task ``index`` (0 <= index < ``split_size()``) in a
        fixed order that mixes the split's kinds; ValueError beyond the split."""
        ...


@runtime_checkable
class KeyedTask(Protocol):
    """An env that can name the task it plays by its content, so that two sets can be
    checked (and, for seeded tasks, drawn) disjoint in content rather than only in seed
    (``mage_core.envs.task_sets``)."""

    def task_key(self) -> str:
        """The content of the current task (after ``reset``): equal exactly when two tasks
        are the same for the agent (the same level, board, goal or game), never anything
        the episode's play changes."""
        ...


@dataclass(frozen=True)
class Revealed:
    """What one finished attempt revealed about its task, as facts the next attempt can use
    (issue 41): MineSweeper's mine that went off and the cells it opened safely. ``task_key``
    names the task it was learnt on (``KeyedTask.task_key``), so that a memory of another
    task is refused; ``facts`` are ``(kind, subject)`` pairs in the order they were learnt,
    each subject written as the task writes an action (``(6, 4)``).

    ``line(style, compact)`` is how a memory shows them: compact, each kind once followed by
    its subjects in the compact action form (``mine (6,4) safe (1,4) (1,5)``); paper, a
    sentence a kind (``mine: (6, 4); safe: (1, 4), (1, 5).``)."""

    task_key: str
    facts: tuple[tuple[str, str], ...]

    def subjects(self, kind: str) -> list[str]:
        return [subject for k, subject in self.facts if k == kind]

    def kinds(self) -> list[str]:
        return list(dict.fromkeys(k for k, _ in self.facts))

    def line(self, style: str, compact: Callable[[str], str] | None = None) -> str:
        if style == "compact":
            shown = compact or (lambda subject: subject)
            return " ".join(f"{kind} " + " ".join(shown(s) for s in self.subjects(kind)) for kind in self.kinds())
        return "; ".join(f"{kind}: " + ", ".join(self.subjects(kind)) for kind in self.kinds()) + "."


def checked_memory(memory: Sequence[Any], key: str, kinds: Sequence[str], expert: str,
                   task: str) -> list[tuple[int, Revealed]]:
    """``memory`` numbered from 1, each item checked for a task's expert: a ``Revealed``, learnt on
    the task ``key`` names, of ``kinds`` only; else a ValueError of one line naming the item
    (``expert``: who reads it, as "MineSweeper expert"; ``task``: what its task is, as "board")."""
    for attempt, item in enumerate(memory, start=1):
        if not isinstance(item, Revealed):
            raise ValueError(f"{expert}: memory item {attempt} is a {type(item).__name__}, not a Revealed")
        if item.task_key != key:
            raise ValueError(f"{expert}: memory item {attempt} was learnt on another {task} "
                             f"({item.task_key!r}), not this one ({key!r})")
        for kind, _ in item.facts:
            if kind not in kinds:
                raise ValueError(f"{expert}: memory item {attempt} has a fact of kind {kind!r} "
                                 f"({expert.split()[0]} reveals {', '.join(kinds)})")
    return list(enumerate(memory, start=1))


@runtime_checkable
class Revealing(Protocol):
    """An env whose attempts reveal facts a later attempt of the same task can use
    (``Revealed``): the meta-episode keeps them in its memory lines and hands them to the
    task's expert."""

    def revealed(self) -> Revealed:
        """What the episode played so far (or just finished) revealed about the task."""
        ...

    def memory_line(self, revealed: Revealed, style: str) -> str:
        """How a memory line shows ``revealed`` in the prompt style (``compact`` or ``paper``):
        usually ``revealed.line`` with the env's compact form of a subject."""
        ...


_REVEALING_TYPES: dict[type, bool] = {}


def is_revealing(env: object) -> bool:
    """``isinstance(env, Revealing)``, decided once per class: a runtime-checkable
    protocol's ``isinstance`` looks up every member each time (tens of microseconds,
    once per finished episode of a rollout); an env's ``revealed``/``memory_line``
    are methods of its class, so the answer is the class's."""
    cls = type(env)
    known = _REVEALING_TYPES.get(cls)
    if known is None:
        known = _REVEALING_TYPES[cls] = isinstance(env, Revealing)
    return known


def split_index_error(index: int, size: int, what: str) -> ValueError:
    """The error of ``FiniteSplit.reset_to`` past the end: which keys to lower."""
    return ValueError(f"an evaluation set asks for {what} {index + 1} of a split of {size}: each is played once, so "
                      f"lower evaluation.meta_episodes_per_opponent_seat (reproduce.eval_per_pair in "
                      f"`mage reproduce`) to at most {size}, or make the split larger")


_ACTION_TAG = re.compile(r"<action>(.*?)</action>", re.IGNORECASE | re.DOTALL)


def extract_action_text(response: str) -> str | None:
    """The content of the last ``<action>...</action>`` block, stripped, or None.

    The last block wins because models often restate a format example first.
    """
    matches = _ACTION_TAG.findall(response)
    if not matches:
        return None
    return matches[-1].strip()


def check_generator(rng: object, who: str) -> np.random.Generator:
    """Reject the common mistake of passing a seed or the legacy RandomState."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            f"{who} needs a numpy.random.Generator (np.random.default_rng(seed)), "
            f"got {type(rng).__name__}"
        )
    return rng
