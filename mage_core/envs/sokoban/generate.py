"""Sokoban level generation by reverse play (docs/method.md section 10).

The paper generates 6x6 rooms with gym-sokoban's algorithm and keeps a level
only if its optimal solution takes 5..21 moves. gym-sokoban (room_utils.py):

1. room topology: a random walk carves floor with random 3x3 masks; the border
   stays wall;
2. targets are placed on random floor cells, the boxes start on them;
3. reverse play: from the solved state the player moves and PULLS boxes; the
   visited state with the highest score (box swaps x total box displacement)
   becomes the level, so every level is solvable by construction;
4. (the paper) a solver checks the optimal length; out-of-bounds levels are
   redrawn.

Steps 1-2 are gym-sokoban's. Step 3 is done differently, for speed and because
it makes step 4 free: gym-sokoban runs a recursive DFS (ttl 300, up to 300k
states, numpy arrays per node), far too slow for the issue's 5 ms target. Here
the reverse search is a breadth-first search over int states that starts from
*every* solved state (boxes on targets, player on any free floor cell). The
BFS depth of a state is then exactly its optimal forward solution length: each
reverse move (step back, optionally pulling the box behind) undoes exactly one
forward move, and an optimal solution never bumps a wall. So every state comes
with its optimal length, and the unit tests check it against ``solve``.

Selection ("score"): gym-sokoban's box-swap count is the number of pulls along
its DFS path; here it is the number of pushes of the optimal solution (pulls
along the BFS path), times the minimum total Manhattan displacement of the
boxes from the targets. As in gym-sokoban, a state is never chosen while any
target is covered, by a box or by the player: gym's ``depth_first_search``
scores 0 every state in which fewer than ``num_boxes`` cells show an empty
target, so a level never starts with a box on a target or with the player
standing on one (before issue 39 only boxes were excluded here:
docs/environments.md, "Sokoban"). Two selection modes:

- ``global`` (default): gym-sokoban's order - the best state of the whole
  reverse search (up to ``search_depth`` moves, the paper's "search depth of
  100"), redrawn if its optimal length is out of bounds (the paper's filter).
- ``window``: the best-scoring state among those whose optimal length is
  already within the bounds; a room is redrawn only if it has none. Slightly
  fewer retries, a slightly different length distribution.
Both cost well under a millisecond per 2-box 6x6 level (benchmarks/bench_sokoban.py),
so the default is the one closer to the paper.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass

import numpy as np

from mage_core.envs.base import check_generator
from mage_core.envs.sokoban.level import OPPOSITE, SokobanLevel, cells_of, neighbour_table
from mage_core.envs.sokoban.solver import state_shift

#: gym-sokoban's five carving masks, as (row, col) offsets from the walk cell.
_MASKS: tuple[tuple[tuple[int, int], ...], ...] = (
    ((0, -1), (0, 0), (0, 1)),
    ((-1, 0), (0, 0), (1, 0)),
    ((0, -1), (0, 0), (1, 0)),
    ((0, -1), (0, 0), (1, -1), (1, 0)),
    ((0, 0), (0, 1), (1, 0)),
)
#: The selection modes of step 3 (see the module docstring).
SELECTION_MODES: dict[str, str] = {
    "global": "best score overall (gym-sokoban), rejected if its optimal length is out of bounds",
    "window": "best score among states whose optimal length is within the bounds",
}


class LevelGenerationError(RuntimeError):
    """No acceptable level within ``max_tries`` rooms."""


@dataclass(frozen=True)
class GenerationStats:
    """How a level was found: rooms tried (1 = first room accepted), its
    optimal solution length in moves, pushes in that solution, and its score."""

    num_tries: int
    optimal_moves: int
    optimal_pushes: int
    score: int


def room_topology(rng: np.random.Generator, height: int, width: int, num_steps: int, p_change_direction: float) -> int:
    """Walls bitmask of a random-walk room (gym-sokoban step 1).

    The walk starts on a random cell, changes to a random direction with
    probability ``p_change_direction`` each step, stays inside the border and
    carves a random mask around each cell it visits. All draws are made in one
    batch per kind (cheaper than one Generator call per step).
    """
    row = int(rng.integers(1, height))
    col = int(rng.integers(1, width))
    direction = int(rng.integers(4))
    changes = (rng.random(num_steps) < p_change_direction).tolist()
    new_directions = rng.integers(0, 4, size=num_steps).tolist()
    masks = rng.integers(0, len(_MASKS), size=num_steps).tolist()
    steps = ((1, 0), (0, 1), (-1, 0), (0, -1))
    floor = 0
    for change, new_direction, mask in zip(changes, new_directions, masks):
        if change:
            direction = new_direction
        row = max(min(row + steps[direction][0], height - 2), 1)
        col = max(min(col + steps[direction][1], width - 2), 1)
        for d_row, d_col in _MASKS[mask]:
            r, c = row + d_row, col + d_col
            if 0 < r < height - 1 and 0 < c < width - 1:
                floor |= 1 << (r * width + c)
    return ((1 << (height * width)) - 1) & ~floor


@functools.lru_cache(maxsize=4096)
def _reverse_table(height: int, width: int, walls: int) -> tuple[tuple[tuple[int, int, int], ...], ...]:
    """``table[q]``: one ``(p, bit of p, bit of the pullable cell)`` per open
    direction d, with ``p = q + d`` the player's reverse step and ``q - d`` the
    cell whose box would be pulled into ``q`` (bit 0 if that is a wall)."""
    neighbours = neighbour_table(height, width, walls)
    table = []
    for cell in range(height * width):
        steps = []
        for d in range(4):
            ahead = neighbours[d][cell]
            if ahead < 0:
                continue
            behind = neighbours[OPPOSITE[d]][cell]
            steps.append((ahead, 1 << ahead, 1 << behind if behind >= 0 else 0))
        table.append(tuple(steps))
    return tuple(table)


def reverse_search(
    height: int, width: int, walls: int, targets: int, max_depth: int
) -> tuple[list[list[int]], dict[int, int]]:
    """Breadth-first reverse play from every solved state (step 3).

    Returns ``layers`` (``layers[k]`` = the int states whose optimal forward
    solution takes exactly k moves, for k <= max_depth) and ``pushes`` (state ->
    number of pulls on its BFS path = pushes of one optimal solution). A state
    is ``(boxes << state_shift(cells)) | player``.
    """
    table = _reverse_table(height, width, walls)
    shift = state_shift(height * width)
    player_mask = (1 << shift) - 1
    free = ((1 << (height * width)) - 1) & ~walls & ~targets
    pushes = {(targets << shift) | cell: 0 for cell in cells_of(free)}
    frontier = list(pushes)
    layers = [frontier]
    for _ in range(max_depth):
        following = []
        append = following.append
        for key in frontier:
            boxes = key >> shift
            cell = key & player_mask
            count = pushes[key]
            for ahead, ahead_bit, behind_bit in table[cell]:
                if boxes & ahead_bit:
                    continue
                moved = (boxes << shift) | ahead
                if moved not in pushes:
                    pushes[moved] = count
                    append(moved)
                if boxes & behind_bit:
                    pulled = ((boxes ^ behind_bit | (1 << cell)) << shift) | ahead
                    if pulled not in pushes:
                        pushes[pulled] = count + 1
                        append(pulled)
        if not following:
            break
        layers.append(following)
        frontier = following
    return layers, pushes


def _displacement(boxes: int, target_cells: list[int], width: int) -> int:
    """Minimum total Manhattan distance over box-to-target assignments (the
    boxes are indistinguishable in an int state, so gym's per-box origin is
    replaced by the best matching; <= 3! assignments)."""
    box_cells = cells_of(boxes)
    best = None
    for order in itertools.permutations(target_cells):
        total = sum(abs(b // width - t // width) + abs(b % width - t % width) for b, t in zip(box_cells, order))
        best = total if best is None or total < best else best
    return best or 0


def _select(
    rng: np.random.Generator, layers: list[list[int]], pushes: dict[int, int], targets: int,
    width: int, shift: int, depths: range,
) -> tuple[int, int, int] | None:
    """``(state, depth, score)`` of the best-scoring state with every target
    uncovered (no box and not the player on one, as gym-sokoban) among
    ``layers[depths]``; ties broken uniformly by ``rng``."""
    target_cells = cells_of(targets)
    player_mask = (1 << shift) - 1
    displacement: dict[int, int] = {}
    best_score, best = 0, []
    for depth in depths:
        if depth >= len(layers):
            break
        for key in layers[depth]:
            boxes = key >> shift
            if boxes & targets or targets >> (key & player_mask) & 1:
                continue
            if boxes not in displacement:
                displacement[boxes] = _displacement(boxes, target_cells, width)
            score = pushes[key] * displacement[boxes]
            if score > best_score:
                best_score, best = score, [(key, depth)]
            elif score == best_score and score > 0:
                best.append((key, depth))
    if not best:
        return None
    key, depth = best[int(rng.integers(len(best)))] if len(best) > 1 else best[0]
    return key, depth, best_score


def generate_level_with_stats(
    rng: np.random.Generator,
    dim_room: int | tuple[int, int] = 6,
    num_boxes: int = 2,
    min_solution_moves: int = 5,
    max_solution_moves: int = 21,
    *,
    selection: str = "global",
    search_depth: int = 100,
    num_walk_steps: int | None = None,
    p_change_direction: float = 0.35,
    max_tries: int = 1000,
) -> tuple[SokobanLevel, GenerationStats]:
    """A random level whose optimal solution takes min..max moves, and how it
    was found. ``num_walk_steps`` defaults to gym-sokoban's
    ``int(1.7 * (height + width))``; ``search_depth`` only matters for
    ``selection="global"``. Raises ``LevelGenerationError`` after ``max_tries``
    rooms without an acceptable level."""
    check_generator(rng, "generate_level")
    height, width = (dim_room, dim_room) if isinstance(dim_room, int) else tuple(dim_room)
    steps = int(1.7 * (height + width)) if num_walk_steps is None else num_walk_steps
    _validate(height, width, num_boxes, min_solution_moves, max_solution_moves, selection,
              search_depth, steps, p_change_direction, max_tries)
    shift = state_shift(height * width)
    bounds = range(min_solution_moves, max_solution_moves + 1)
    if selection == "window":  # choose within the bounds, so every choice is accepted
        max_depth, depths, accept = max_solution_moves, bounds, range(max_solution_moves + 1)
    else:  # choose over the whole search, then apply the paper's filter
        max_depth, depths, accept = search_depth, range(search_depth + 1), bounds
    for attempt in range(1, max_tries + 1):
        walls = room_topology(rng, height, width, steps, p_change_direction)
        floor = cells_of(((1 << (height * width)) - 1) & ~walls)
        if len(floor) <= num_boxes + 1:  # gym-sokoban: room too small for the boxes and the player
            continue
        chosen = rng.choice(len(floor), size=num_boxes, replace=False).tolist()
        targets = sum(1 << floor[i] for i in chosen)
        layers, pushes = reverse_search(height, width, walls, targets, max_depth)
        best = _select(rng, layers, pushes, targets, width, shift, depths)
        if best is None or best[1] not in accept:
            continue
        key, depth, score = best
        level = SokobanLevel(height, width, walls, targets, key >> shift, key & ((1 << shift) - 1))
        return level, GenerationStats(attempt, depth, pushes[key], score)
    raise LevelGenerationError(
        f"no {height}x{width} level with {num_boxes} boxes and an optimal solution of "
        f"{min_solution_moves}..{max_solution_moves} moves in {max_tries} rooms "
        f"(selection={selection!r}); widen the bounds or raise max_tries"
    )


def generate_level(
    rng: np.random.Generator,
    dim_room: int | tuple[int, int] = 6,
    num_boxes: int = 2,
    min_solution_moves: int = 5,
    max_solution_moves: int = 21,
    **knobs: object,
) -> SokobanLevel:
    """A random solvable level (see ``generate_level_with_stats`` for knobs)."""
    level, _ = generate_level_with_stats(
        rng, dim_room, num_boxes, min_solution_moves, max_solution_moves, **knobs  # type: ignore[arg-type]
    )
    return level


def _validate(
    height: int, width: int, num_boxes: int, min_moves: int, max_moves: int, selection: str,
    search_depth: int, num_walk_steps: int, p_change_direction: float, max_tries: int,
) -> None:
    """Reject bad generator arguments, naming every offending input at once."""
    errors = []
    if height < 4 or width < 4:
        errors.append(f"dim_room must be at least 4x4 (a 2x2 interior), got {height}x{width}")
    if num_boxes < 1:
        errors.append(f"num_boxes must be >= 1, got {num_boxes}")
    if min_moves < 0 or max_moves < min_moves:
        errors.append(f"need 0 <= min_solution_moves <= max_solution_moves, got {min_moves} and {max_moves}")
    if selection not in SELECTION_MODES:
        errors.append(f"selection must be one of {list(SELECTION_MODES)}, got {selection!r}")
    elif selection == "global" and search_depth < max_moves:
        errors.append(f"search_depth ({search_depth}) must be >= max_solution_moves ({max_moves})")
    if num_walk_steps < 1:
        errors.append(f"num_walk_steps must be >= 1, got {num_walk_steps}")
    if not 0.0 <= p_change_direction <= 1.0:
        errors.append(f"p_change_direction must be in [0, 1], got {p_change_direction}")
    if max_tries < 1:
        errors.append(f"max_tries must be >= 1, got {max_tries}")
    if errors:
        raise ValueError("generate_level: " + "; ".join(errors))
