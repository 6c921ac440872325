"""Sokoban rules on compact integer states (docs/method.md section 10).

A room is a ``height x width`` grid whose cells are numbered row-major
(``index = row * width + col``, 0-based). Walls, targets and boxes are bitmasks
over those indices and the player is one index, so a whole state is two ints:
hashing, copying and comparing states costs next to nothing, which is what lets
the generator and the BFS solver meet the issue's speed targets in pure Python.

The text alphabet is the one of the LaMer/RAGEN Sokoban renderings (the MAGE
reference code builds on them): ``#`` wall, ``_`` floor, ``O`` target, ``X`` box,
``√`` box on target, ``P`` player, ``S`` player on target.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Sequence

#: Primitive moves in their fixed order; the index is the direction id.
DIRECTIONS: tuple[str, ...] = ("up", "down", "left", "right")
#: Direction name -> direction id.
DIRECTION_IDS: dict[str, int] = {"up": 0, "down": 1, "left": 2, "right": 3}
#: (row, col) change of each direction id.
DELTAS: tuple[tuple[int, int], ...] = ((-1, 0), (1, 0), (0, -1), (0, 1))
#: The opposite of each direction id (up<->down, left<->right).
OPPOSITE: tuple[int, ...] = (1, 0, 3, 2)

WALL, FLOOR, TARGET, BOX, BOX_ON_TARGET, PLAYER, PLAYER_ON_TARGET = "#", "_", "O", "X", "√", "P", "S"
#: Symbol -> (is wall, is target, has box, has player).
_SYMBOLS: dict[str, tuple[bool, bool, bool, bool]] = {
    WALL: (True, False, False, False),
    FLOOR: (False, False, False, False),
    TARGET: (False, True, False, False),
    BOX: (False, False, True, False),
    BOX_ON_TARGET: (False, True, True, False),
    PLAYER: (False, False, False, True),
    PLAYER_ON_TARGET: (False, True, False, True),
}
#: One-line legend of the alphabet, for observations and prompts.
LEGEND = "# wall, _ floor, O target, X box, √ box on target, P player, S player on target"


def cells_of(mask: int) -> list[int]:
    """The cell indices set in ``mask``, ascending."""
    cells = []
    while mask:
        low = mask & -mask
        cells.append(low.bit_length() - 1)
        mask ^= low
    return cells


@functools.lru_cache(maxsize=4096)
def neighbour_table(height: int, width: int, walls: int) -> tuple[tuple[int, ...], ...]:
    """``table[d][cell]``: the cell one step in direction ``d``, or -1 if that is
    a wall or off the grid. Cached per room: every hot loop only indexes it."""
    table = []
    for d_row, d_col in DELTAS:
        row_table = []
        for cell in range(height * width):
            row, col = divmod(cell, width)
            r, c = row + d_row, col + d_col
            nxt = r * width + c
            inside = 0 <= r < height and 0 <= c < width
            row_table.append(nxt if inside and not (walls >> nxt) & 1 else -1)
        table.append(tuple(row_table))
    return tuple(table)


def move_state(neighbours: tuple[tuple[int, ...], ...], player: int, boxes: int, direction: int) -> tuple[int, int]:
    """One primitive move: ``(player, boxes)`` after moving in ``direction``.

    As in gym-sokoban, a move into a wall, or a push of a box into a wall or
    another box, leaves the state unchanged (the env still charges the step).
    """
    nxt = neighbours[direction][player]
    if nxt < 0:
        return player, boxes
    bit = 1 << nxt
    if not boxes & bit:
        return nxt, boxes
    beyond = neighbours[direction][nxt]
    if beyond < 0 or (boxes >> beyond) & 1:
        return player, boxes
    return nxt, boxes ^ bit ^ (1 << beyond)


@dataclass(frozen=True)
class SokobanLevel:
    """An immutable Sokoban position: room, targets, boxes and player.

    ``walls``/``targets``/``boxes`` are bitmasks over row-major cell indices and
    ``player`` is a cell index. Equal levels compare and hash equal, so a level
    is its own exact identity for ``restart()`` and for caches.
    """

    height: int
    width: int
    walls: int
    targets: int
    boxes: int
    player: int

    def __post_init__(self) -> None:
        errors = _validation_errors(self)
        if errors:
            raise ValueError("invalid SokobanLevel: " + "; ".join(errors))

    @property
    def num_cells(self) -> int:
        return self.height * self.width

    @property
    def num_boxes(self) -> int:
        return self.boxes.bit_count()

    @property
    def boxes_on_target(self) -> int:
        return (self.boxes & self.targets).bit_count()

    @property
    def is_solved(self) -> bool:
        return self.boxes == self.targets

    def neighbours(self) -> tuple[tuple[int, ...], ...]:
        """The room's cached neighbour table (see ``neighbour_table``)."""
        return neighbour_table(self.height, self.width, self.walls)

    def with_state(self, player: int, boxes: int) -> "SokobanLevel":
        """The same room and targets with another player cell and box set."""
        return SokobanLevel(self.height, self.width, self.walls, self.targets, boxes, player)

    def move(self, direction: str) -> "SokobanLevel":
        """The level after one primitive move named ``direction`` (a wall bump
        or a blocked push returns an equal level)."""
        if direction not in DIRECTION_IDS:
            raise ValueError(f"direction must be one of {list(DIRECTION_IDS)}, got {direction!r}")
        player, boxes = move_state(self.neighbours(), self.player, self.boxes, DIRECTION_IDS[direction])
        return self.with_state(player, boxes)

    def symbol_at(self, cell: int) -> str:
        """The one-character symbol of ``cell`` in the LaMer alphabet."""
        bit = 1 << cell
        if self.walls & bit:
            return WALL
        on_target = bool(self.targets & bit)
        if cell == self.player:
            return PLAYER_ON_TARGET if on_target else PLAYER
        if self.boxes & bit:
            return BOX_ON_TARGET if on_target else BOX
        return TARGET if on_target else FLOOR

    def rows(self) -> list[str]:
        """One string per row, one symbol per cell, no separators."""
        w = self.width
        return ["".join(self.symbol_at(r * w + c) for c in range(w)) for r in range(self.height)]

    def __str__(self) -> str:
        return "\n".join(self.rows())

    @classmethod
    def from_rows(cls, rows: Sequence[str]) -> "SokobanLevel":
        """Parse rows of symbols (the inverse of ``rows()``); for hand-made
        levels in tests and configs. Spaces inside a row are ignored."""
        grid = [row.replace(" ", "") for row in rows if row.strip()]
        if not grid:
            raise ValueError("rows must contain at least one non-empty row")
        width = len(grid[0])
        if any(len(row) != width for row in grid):
            raise ValueError(f"rows must all have the same length, got lengths {[len(r) for r in grid]}")
        walls = targets = boxes = 0
        players = []
        for r, row in enumerate(grid):
            for c, symbol in enumerate(row):
                if symbol not in _SYMBOLS:
                    raise ValueError(
                        f"unknown symbol {symbol!r} at row {r + 1}, column {c + 1}; valid: {list(_SYMBOLS)}"
                    )
                is_wall, is_target, has_box, has_player = _SYMBOLS[symbol]
                bit = 1 << (r * width + c)
                walls |= bit if is_wall else 0
                targets |= bit if is_target else 0
                boxes |= bit if has_box else 0
                if has_player:
                    players.append(r * width + c)
        if len(players) != 1:
            raise ValueError(f"rows must contain exactly one player (P or S), found {len(players)}")
        return cls(len(grid), width, walls, targets, boxes, players[0])


def _validation_errors(level: SokobanLevel) -> list[str]:
    """Every inconsistency of ``level``, so one error message lists them all."""
    errors = []
    if level.height < 3 or level.width < 3:
        return [f"height and width must be >= 3, got {level.height}x{level.width}"]
    full = (1 << level.num_cells) - 1
    for name in ("walls", "targets", "boxes"):
        mask = getattr(level, name)
        if mask < 0 or mask & ~full:
            errors.append(f"{name} mask has bits outside the {level.num_cells} cells")
    if not 0 <= level.player < level.num_cells:
        errors.append(f"player must be a cell index in [0, {level.num_cells}), got {level.player}")
    elif (level.walls | level.boxes) >> level.player & 1:
        errors.append(f"player cell {level.player} is a wall or holds a box")
    if level.boxes & level.walls or level.targets & level.walls:
        errors.append("boxes and targets must lie on floor cells, not walls")
    if level.boxes.bit_count() == 0 or level.boxes.bit_count() != level.targets.bit_count():
        errors.append(f"need as many boxes as targets (>= 1), got {level.boxes.bit_count()} boxes "
                      f"and {level.targets.bit_count()} targets")
    return errors
