"""The Sokoban agent environment (docs/method.md sections 1-3 and 10).

One episode = one level, at most ``max_turns`` agent turns (paper: 7), each turn
1..``moves_per_turn`` primitive moves (paper: 3) written ``up, left, down``.
Rewards follow gym-sokoban per primitive move: ``step_penalty`` every move (a
wall bump or a blocked push included), ``box_on_target`` / ``box_off_target``
when the number of boxes on targets rises / falls, ``all_boxes_on_target`` when
the level is solved. The turn's reward is the SUM over its moves (the reference
code kept only the last move's reward: a defect the issue asks to fix). A position
that can no longer be solved does not end the episode (LaMer's does; why not:
docs/environments.md, "Sokoban").

Stalling (docs/rewards.md): an invalid turn moves nothing and costs no step
penalty, so an episode that the turn limit ends after at least one invalid turn
pays, on its last turn, what brings its task-reward total down to
``legal_return_floor()`` (if it is above it): a lower bound on what legal play of
the level can earn, ``max_turns x moves_per_turn`` step penalties plus one
``box_off_target`` for every box that starts on a target (with gym-sokoban's
rewards; ``sokoban_return_floor`` holds the general bound). Stalling never pays
more than the worst legal play.

Action words: only ``up``/``down``/``left``/``right`` (any case). Single letters
(u/d/l/r) are rejected on purpose: the paper's format is words, and an
abbreviation such as ``l`` is easily a typo of ``1``; being strict keeps the
invalid-action signal honest.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

import numpy as np

from mage_core.envs.base import Outcome, StepResult, check_generator, extract_action_text
from mage_core.envs.rewards import stalled_timeout_reward
from mage_core.envs.sokoban.generate import generate_level
from mage_core.envs.sokoban.level import DIRECTION_IDS, DIRECTIONS, LEGEND, SokobanLevel, move_state
from mage_core.envs.sokoban.params import SokobanSettings

_SEPARATORS = re.compile(r"[,\s]+")


@dataclass(frozen=True)
class _Turn:
    """What one turn's primitive moves did."""

    reward: float
    player: int
    boxes: int
    moves_applied: int


def sokoban_return_floor(settings: SokobanSettings, boxes_on_target_at_start: int) -> float:
    """A lower bound on the task-reward total of any legal episode of a level that
    starts with ``boxes_on_target_at_start`` boxes on targets (docs/rewards.md).

    Legal play makes at most ``max_turns x moves_per_turn`` primitive moves. Each
    costs ``step_penalty``; each changes the number of boxes on targets by at most
    one (a push moves one box), so with ``n_on`` moves that put a box on a target
    and ``n_off`` that take one off, ``n_on + n_off`` is at most the number of moves
    and ``n_off - n_on`` = boxes on targets at the start minus at the end; the
    solved bonus comes at most once. The bound adds the three terms' minima. With
    gym-sokoban's rewards (-0.1, +1, -1, +10) it is ``-0.1 x moves - start``: a box
    pushed off and back on nets nothing, so the worst is every starting box off.
    """
    s = settings
    num_moves = s.max_turns * s.moves_per_turn
    start = boxes_on_target_at_start
    box_terms = min(
        s.box_on_target * n_on + s.box_off_target * (n_on + start - end)
        for end in range(s.num_boxes + 1)
        for n_on in range(num_moves + 1)
        if n_on + start - end >= 0 and 2 * n_on + start - end <= num_moves
    )
    return num_moves * min(s.step_penalty, 0.0) + box_terms + min(s.all_boxes_on_target, 0.0)


def _action_table(moves_per_turn: int) -> dict[str, tuple[int, ...]]:
    """Canonical action text -> direction ids, all 1..n-move sequences, shorter
    first, each length in ``itertools.product`` order of ``DIRECTIONS``."""
    table = {}
    for length in range(1, moves_per_turn + 1):
        for combo in itertools.product(range(len(DIRECTIONS)), repeat=length):
            table[", ".join(DIRECTIONS[d] for d in combo)] = combo
    return table


class SokobanEnv:
    """Sokoban from the agent's seat (the ``Env`` protocol of envs/base.py).

    ``reset()`` draws a new level from ``rng`` (or re-uses ``level`` if one was
    given); ``restart()`` replays exactly the same level (docs/method.md section 1).
    Call ``reset()`` before anything else.
    """

    name = "sokoban"

    def __init__(self, settings: SokobanSettings, rng: np.random.Generator, level: SokobanLevel | None = None) -> None:
        self.settings = settings
        self._rng = check_generator(rng, "SokobanEnv")
        if level is not None and level.num_boxes != settings.num_boxes:
            raise ValueError(f"level has {level.num_boxes} boxes but settings.num_boxes is {settings.num_boxes}")
        self._fixed_level = level
        self._actions = _action_table(settings.moves_per_turn)
        self._initial: SokobanLevel | None = None
        self._player = 0
        self._boxes = 0
        self._turn = 0
        self._done = False
        self._reward_so_far = 0.0  # task reward of the episode's turns so far
        self._had_invalid = False
        self._return_floor = 0.0

    # ----- life cycle -------------------------------------------------
    def reset(self) -> None:
        """A new level (drawn from the env's generator unless fixed), turn 0."""
        s = self.settings
        if self._fixed_level is not None:
            self._initial = self._fixed_level
        else:
            self._initial = generate_level(
                self._rng, s.dim_room, s.num_boxes, s.min_solution_moves, s.max_solution_moves
            )
        self.restart()

    def restart(self) -> None:
        """Back to exactly the current level's initial position, turn 0."""
        initial = self._require_level()
        self._player, self._boxes = initial.player, initial.boxes
        self._turn = 0
        self._done = False
        self._reward_so_far = 0.0
        self._had_invalid = False
        self._return_floor = sokoban_return_floor(self.settings, initial.boxes_on_target)

    # ----- views ------------------------------------------------------
    @property
    def done(self) -> bool:
        return self._done

    @property
    def turn(self) -> int:
        return self._turn

    def legal_return_floor(self) -> float:
        """A lower bound on the task-reward total of legal play of this level
        (``sokoban_return_floor``); what a timed-out episode with an invalid turn pays."""
        self._require_level()
        return self._return_floor

    @property
    def initial_level(self) -> SokobanLevel:
        """The level as it was at the start of the episode."""
        return self._require_level()

    def task_key(self) -> str:
        """The level itself: walls, targets, boxes and player (``envs.base.KeyedTask``)."""
        lv = self._require_level()
        return f"sokoban {lv.height}x{lv.width} walls {lv.walls:x} targets {lv.targets:x} boxes {lv.boxes:x} player {lv.player}"

    @property
    def level(self) -> SokobanLevel:
        """The current position as an immutable level."""
        return self._require_level().with_state(self._player, self._boxes)

    def observation(self) -> str:
        """The grid with 1-based row and column numbers, the legend and the box
        count; deterministic, so equal positions give equal text (GiGPO
        anchors, docs/method.md section 5)."""
        level = self.level
        pad = len(str(max(level.height, level.width)))
        header = " " * pad + " " + " ".join(str(c).rjust(pad) for c in range(1, level.width + 1))
        body = [
            str(r + 1).rjust(pad) + " " + " ".join(symbol.rjust(pad) for symbol in row)
            for r, row in enumerate(level.rows())
        ]
        return "\n".join(
            [f"Legend: {LEGEND}. Row 1 is the top, column 1 the left.", header, *body,
             f"Boxes on targets: {level.boxes_on_target} of {level.num_boxes}"]
        )

    def compact_observation(self) -> str:
        """The grid in few tokens, for small models (prompt style ``compact``):
        rows of legend symbols separated by ``/``, then ``solved``/``timeout``
        once the episode is over."""
        rows = " / ".join(" ".join(row) for row in self.level.rows())
        if not self._done:
            return rows
        return f"{rows} {'solved' if self.level.boxes_on_target == self.level.num_boxes else 'timeout'}"

    def compact_action(self, action: str) -> str:
        """A legal action as ONE word of the compact style (``"(2, 3)"`` -> ``"(2,3)"``,
        ``"up, left"`` -> ``"up,left"``): the embedded tokenizer keeps every such word
        whole, so a constrained choice is read at one position."""
        return "".join(action.split())

    def legal_actions(self) -> list[str]:
        """All 1..moves_per_turn move sequences (84 for 3), fixed order; empty
        once the episode is over."""
        self._require_level()
        return [] if self._done else list(self._actions)

    def parse_action(self, response: str) -> str | None:
        """The canonical action of a response's last ``<action>`` block, or None.

        Splits on commas and whitespace, lower-cases, and accepts only
        direction words, at most ``moves_per_turn`` of them. Never raises.
        """
        if not isinstance(response, str):
            return None
        text = extract_action_text(response)
        if text is None:
            return None
        words = [w for w in _SEPARATORS.split(text.lower()) if w]
        if not 1 <= len(words) <= self.settings.moves_per_turn:
            return None
        if any(w not in DIRECTION_IDS for w in words):
            return None
        return ", ".join(words)

    # ----- dynamics ---------------------------------------------------
    def step(self, action: str | None) -> StepResult:
        """Play one turn. ``None`` is an invalid action: no reward, no move,
        but the turn counts (docs/method.md section 2); if the turn limit then ends an
        episode that had an invalid turn, the last turn pays down to the floor
        (module docstring)."""
        initial = self._require_level()
        if self._done:
            raise RuntimeError("SokobanEnv.step: the episode is over; call reset() or restart()")
        if action is None:
            turn = _Turn(0.0, self._player, self._boxes, 0)
        elif action in self._actions:
            turn = self._play(initial, self._actions[action])
        else:
            raise ValueError(
                f"SokobanEnv.step: action must be a canonical text from legal_actions() such as "
                f"'up, left, down' (or None), got {action!r}"
            )
        self._player, self._boxes = turn.player, turn.boxes
        self._turn += 1
        solved = self._boxes == initial.targets
        outcome = Outcome.WIN if solved else (Outcome.TIMEOUT if self._turn >= self.settings.max_turns else None)
        self._done = outcome is not None
        self._had_invalid |= action is None
        reward = turn.reward
        if outcome is Outcome.TIMEOUT and self._had_invalid:
            reward = stalled_timeout_reward(self._reward_so_far, reward, self._return_floor)
        self._reward_so_far += reward
        info = {
            "boxes_on_target": (self._boxes & initial.targets).bit_count(),
            "moves_applied": turn.moves_applied,
            "solved": solved,
        }
        return StepResult(reward=reward, done=self._done, invalid=action is None, outcome=outcome, info=info)

    def _play(self, initial: SokobanLevel, directions: tuple[int, ...]) -> _Turn:
        """Apply the moves one by one, summing gym-sokoban's per-move rewards;
        stop as soon as every box is on a target."""
        s = self.settings
        neighbours = initial.neighbours()
        targets = initial.targets
        player, boxes = self._player, self._boxes
        on_target = (boxes & targets).bit_count()
        reward, applied = 0.0, 0
        for direction in directions:
            player, boxes = move_state(neighbours, player, boxes, direction)
            applied += 1
            reward += s.step_penalty
            now_on_target = (boxes & targets).bit_count()
            if now_on_target > on_target:
                reward += s.box_on_target
            elif now_on_target < on_target:
                reward += s.box_off_target
            on_target = now_on_target
            if boxes == targets:
                reward += s.all_boxes_on_target
                break
        return _Turn(reward, player, boxes, applied)

    def _require_level(self) -> SokobanLevel:
        if self._initial is None:
            raise RuntimeError("SokobanEnv: call reset() before using the environment")
        return self._initial
