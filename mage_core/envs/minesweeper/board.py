"""MineSweeper's rules: a seeded board, reveals with flood fill, and an exact safe-move oracle.

Cells are ``(row, col)``, 0-based here (the agent's text is 1-based: ``env.py``). A board is
immutable: ``reveal`` returns a new one. The first reveal is made when the board is drawn
(``draw_board``), as LaMer's environment does, and is always safe: mines are placed
uniformly among the *other* cells. Revealing a cell with no neighbouring mine opens its
neighbours, recursively (flood fill). The game is won when every safe cell is open, lost
when a mine is opened; no flags are needed.

``mine_probabilities`` is exact: it enumerates every placement of the mines over the
unopened cells that agrees with the open numbers (a 6 x 6 board with 3 mines has at most
C(35, 3) = 6,545 placements), so a cell of probability 0 is provably safe. Tests and
benchmarks use it as the oracle; the agent never sees it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from fractions import Fraction
from typing import Iterator

import numpy as np

Cell = tuple[int, int]


@dataclass(frozen=True)
class Board:
    """``rows`` x ``cols`` cells; ``mines`` the mined cells; ``opened`` the open ones; ``exploded``
    the mine that was opened (the game is lost), if any."""

    rows: int
    cols: int
    mines: frozenset[Cell]
    opened: frozenset[Cell]
    exploded: Cell | None = None

    def cells(self) -> Iterator[Cell]:
        return itertools.product(range(self.rows), range(self.cols))

    def neighbours(self, cell: Cell) -> Iterator[Cell]:
        r, c = cell
        for dr, dc in itertools.product((-1, 0, 1), repeat=2):
            if (dr or dc) and 0 <= r + dr < self.rows and 0 <= c + dc < self.cols:
                yield r + dr, c + dc

    def count(self, cell: Cell) -> int:
        """Mines among the eight (or fewer, at an edge) neighbours of ``cell``."""
        return sum(n in self.mines for n in self.neighbours(cell))

    def closed(self) -> list[Cell]:
        """The unopened cells, row by row: what a reveal may choose."""
        return [cell for cell in self.cells() if cell not in self.opened]

    @property
    def won(self) -> bool:
        return self.exploded is None and len(self.opened) == self.rows * self.cols - len(self.mines)

    @property
    def lost(self) -> bool:
        return self.exploded is not None

    def reveal(self, cell: Cell) -> "Board":
        """The board after opening ``cell`` (a closed cell): a mine ends the game; a cell
        without neighbouring mines opens its neighbours, recursively."""
        if cell in self.opened or not (0 <= cell[0] < self.rows and 0 <= cell[1] < self.cols):
            raise ValueError(f"cell {cell} is not a closed cell of this {self.rows}x{self.cols} board")
        if self.lost or self.won:
            raise ValueError("the game is over: nothing more can be revealed")
        if cell in self.mines:
            return Board(self.rows, self.cols, self.mines, self.opened | {cell}, exploded=cell)
        opened, frontier = set(self.opened), [cell]
        while frontier:
            current = frontier.pop()
            if current in opened:
                continue
            opened.add(current)
            if self.count(current) == 0:
                frontier.extend(n for n in self.neighbours(current) if n not in opened)
        return Board(self.rows, self.cols, self.mines, frozenset(opened))

    def symbol(self, cell: Cell) -> str:
        """What the player sees: ``?`` closed, ``*`` the exploded mine, ``.`` an open cell with
        no neighbouring mine, ``1``-``8`` the count of its neighbouring mines."""
        if cell == self.exploded:
            return "*"
        if cell not in self.opened:
            return "?"
        n = self.count(cell)
        return str(n) if n else "."

    def symbol_rows(self) -> list[list[str]]:
        return [[self.symbol((r, c)) for c in range(self.cols)] for r in range(self.rows)]


def draw_board(rng: np.random.Generator, rows: int, cols: int, num_mines: int, max_tries: int = 1000) -> Board:
    """A board with ``num_mines`` mines and its first reveal made: the first cell is drawn
    uniformly, the mines uniformly among the other cells, then that cell is opened. A draw
    whose first reveal already wins is drawn again, cell and mines (at most ``max_tries``
    times). LaMer keeps the mines and reveals another cell, which may be a mine; redrawing
    both keeps every board playable and the layouts behind a first board equally likely, the
    prior ``mine_probabilities`` assumes (docs/environments.md, "MineSweeper")."""
    if not 1 <= num_mines <= rows * cols - 2:
        raise ValueError(f"num_mines must be in 1..{rows * cols - 2} on a {rows}x{cols} board, got {num_mines}")
    for _ in range(max_tries):
        first = int(rng.integers(rows * cols))
        others = [i for i in range(rows * cols) if i != first]
        mined = rng.choice(len(others), size=num_mines, replace=False)
        mines = frozenset(divmod(others[int(i)], cols) for i in mined)
        board = Board(rows, cols, mines, frozenset()).reveal(divmod(first, cols))
        if not board.won:
            return board
    raise RuntimeError(f"no board of {rows}x{cols} with {num_mines} mines left a cell to reveal in {max_tries} draws")


def mine_probabilities(board: Board, num_mines: int,
                       known_mines: frozenset[Cell] = frozenset()) -> dict[Cell, Fraction]:
    """The exact probability that each closed cell holds a mine, given the open numbers,
    ``num_mines`` in all and ``known_mines`` (closed cells known to hold one: a mine that went
    off in an earlier attempt), every consistent placement equally likely (a uniform prior
    over placements, which is how ``draw_board`` places them given the first cell)."""
    closed = board.closed()
    if not known_mines <= set(closed) | ({board.exploded} - {None}):
        raise ValueError(f"known mines {sorted(known_mines - set(closed))} are open cells of the board")
    constraints = [(cell, board.count(cell), [n for n in board.neighbours(cell) if n not in board.opened])
                   for cell in board.opened if cell != board.exploded]
    totals = dict.fromkeys(closed, 0)
    consistent = 0
    for placement in itertools.combinations(closed, num_mines):
        chosen = set(placement)
        if known_mines <= chosen and all(sum(n in chosen for n in hidden) == count for _, count, hidden in constraints):
            consistent += 1
            for cell in placement:
                totals[cell] += 1
    if consistent == 0:
        raise ValueError("no placement of the mines agrees with the open numbers")
    return {cell: Fraction(n, consistent) for cell, n in totals.items()}


def safe_cells(board: Board, num_mines: int) -> list[Cell]:
    """The closed cells that no consistent placement mines: provably safe to reveal."""
    return [cell for cell, p in mine_probabilities(board, num_mines).items() if p == 0]


def fewest_reveals(board: Board) -> int:
    """The fewest reveals that clear ``board`` from where it stands for a player who knows
    where every mine is: one for each 8-connected group of closed cells with no mine around
    (revealing any one opens the group and the cells around it) and one for each other
    closed safe cell that no such cell touches. A board clears within a turn limit exactly
    when this is at most the limit, so the share of boards for which it is gives the exact
    ceiling of any play, "the board known" (``mage_core/envs/minesweeper/expert.py``)."""
    closed_safe = [c for c in board.closed() if c not in board.mines]
    zeros = {c for c in closed_safe if board.count(c) == 0}
    groups, seen = 0, set()
    for cell in zeros:
        if cell in seen:
            continue
        groups += 1
        stack = [cell]
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            stack.extend(n for n in board.neighbours(current) if n in zeros and n not in seen)
    touched = {n for z in zeros for n in board.neighbours(z)}
    return groups + sum(1 for c in closed_safe if c not in zeros and c not in touched)
