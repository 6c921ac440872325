"""UCT Monte-Carlo tree search with random rollouts and the MCTS-Solver.

This is the strong half of the Tic-Tac-Toe population (MCTS-100, docs/method.md
section 7) and the unseen evaluation opponent (MCTS-1000, section 8). The paper's
reference code uses OpenSpiel's ``MCTSBot`` (uct_c=1.4, one random rollout per
leaf, ``solve=True``); both searches here follow that algorithm step for step:

- a leaf is evaluated the first time it is reached (the root too, by the first
  simulation); it is expanded on its second visit, its children shuffled once
  (unvisited children are then tried in that order: their UCT value is +inf);
- selection maximises ``W/N + c * sqrt(ln N_parent / N)``, a proven child
  counting as its proven value;
- MCTS-Solver: a terminal leaf is proven; a node is proven when one child is a
  proven win for the player choosing or all children are proven (then it takes
  the best); the search stops early once the root is proven;
- the move played is the best child by (proven value or 0, visits, total reward):
  proven wins first, then the most visited, proven losses last.

Two implementations:

- ``reference_mcts_move``: straightforward, for any deterministic two-player
  ``GameState``, with real random playouts.
- ``fast_mcts_move``: specialised to Tic-Tac-Toe for speed (target: a
  1000-simulation move on the empty board in <= 10 ms). All 5,478 positions are
  indexed once with successor tables; a random rollout is drawn as ONE uniform
  against the precomputed outcome distribution of a uniform-random playout from
  the leaf (same distribution as playing it out); uniforms are drawn in batches;
  the tree lives in flat preallocated lists. ``tests/unit/test_ttt_opponents.py``
  checks that both choose moves with the same distribution.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from mage_core.envs.base import CHANCE, GameState, check_generator
from mage_core.envs.tic_tac_toe.rules import TicTacToeState, reachable_states

#: Uniforms drawn per batch in the fast search (a 1000-simulation search from
#: the empty board uses ~3,000: one per rollout plus the child shuffles).
_UNIFORM_BATCH = 1024


def _check_search_args(num_simulations: int, uct_c: float) -> None:
    if not isinstance(num_simulations, int) or num_simulations < 2:
        raise ValueError(
            f"num_simulations must be an int >= 2 (the first simulation only "
            f"evaluates the root), got {num_simulations!r}"
        )
    if not math.isfinite(uct_c) or uct_c < 0:
        raise ValueError(f"uct_c must be a finite number >= 0, got {uct_c!r}")


# ----------------------------------------------------------------------------
# Reference implementation: any deterministic two-player GameState.
# ----------------------------------------------------------------------------


class _Node:
    """A search-tree node; ``mover`` made the move leading here and ``total``
    sums rollout returns from the mover's point of view."""

    __slots__ = ("move", "mover", "visits", "total", "outcome", "children")

    def __init__(self, move: int | None, mover: int) -> None:
        self.move = move
        self.mover = mover
        self.visits = 0
        self.total = 0.0
        self.outcome: tuple[float, float] | None = None
        self.children: list[_Node] = []

    def uct(self, parent_visits: int, uct_c: float) -> float:
        if self.outcome is not None:
            return self.outcome[self.mover]
        if self.visits == 0:
            return math.inf
        return self.total / self.visits + uct_c * math.sqrt(
            math.log(parent_visits) / self.visits
        )

    def sort_key(self) -> tuple[float, int, float]:
        proven = 0.0 if self.outcome is None else self.outcome[self.mover]
        return (proven, self.visits, self.total)


def _random_playout(state: GameState, rng: np.random.Generator) -> tuple[float, float]:
    while not state.is_terminal():
        moves = state.legal_moves()
        state = state.apply(moves[int(rng.integers(len(moves)))])
    return state.returns()


def _solve_node(node: _Node, max_utility: float) -> bool:
    """MCTS-Solver backup at ``node``; True if the node is now proven."""
    player = node.children[0].mover
    best: tuple[float, float] | None = None
    all_solved = True
    for child in node.children:
        if child.outcome is None:
            all_solved = False
        elif best is None or child.outcome[player] > best[player]:
            best = child.outcome
    if best is not None and (all_solved or best[player] == max_utility):
        node.outcome = best
        return True
    return False


def reference_mcts_move(
    state: GameState,
    num_simulations: int,
    uct_c: float,
    solver: bool,
    rng: np.random.Generator,
    max_utility: float = 1.0,
) -> int:
    """The move of a UCT search from ``state`` (slow; see the module docstring)."""
    _check_search_args(num_simulations, uct_c)
    check_generator(rng, "reference_mcts_move")
    if state.is_terminal() or state.to_move == CHANCE:
        raise ValueError("reference_mcts_move needs a decision state (not terminal, not chance)")
    root = _Node(None, state.to_move)
    for _ in range(num_simulations):
        path, node, current = [root], root, state
        while not current.is_terminal() and node.visits > 0:
            if not node.children:
                moves = list(current.legal_moves())
                rng.shuffle(moves)
                node.children = [_Node(move, current.to_move) for move in moves]
            parent_visits = node.visits
            node = max(node.children, key=lambda child: child.uct(parent_visits, uct_c))
            current = current.apply(node.move)  # type: ignore[arg-type]
            path.append(node)
        if current.is_terminal():
            returns = current.returns()
            path[-1].outcome = returns
            solved = solver
        else:
            returns = _random_playout(current, rng)
            solved = False
        for node in reversed(path):
            node.visits += 1
            node.total += returns[node.mover]
            if solved and node.children:
                solved = _solve_node(node, max_utility)
        if root.outcome is not None:
            break
    return int(max(root.children, key=_Node.sort_key).move)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------
# Fast implementation: Tic-Tac-Toe only.
# ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Tables:
    """Every reachable position, indexed once (index 0 = the empty board)."""

    index: dict[tuple[int, ...], int]
    children: list[tuple[int, ...]]  # successor indices, legal moves ascending
    moves: list[tuple[int, ...]]  # the cell of each successor
    terminal: list[int | None]  # X's return at a terminal position, else None
    mover_sign: list[int]  # +1 if X made the last move, else -1
    rollout_x_wins: list[float]  # P(X wins) under uniform-random play
    rollout_decisive: list[float]  # P(X wins) + P(O wins)


@lru_cache(maxsize=1)
def _tables() -> _Tables:
    states = list(reachable_states().values())  # breadth-first: children later
    index = {state.board: i for i, state in enumerate(states)}
    children, moves, terminal, mover_sign = [], [], [], []
    for state in states:
        legal = state.legal_moves()
        moves.append(tuple(legal))
        children.append(tuple(index[state.apply(move).board] for move in legal))
        terminal.append(int(state.returns()[0]) if state.is_terminal() else None)
        mover_sign.append(1 if state.board.count(1) > state.board.count(2) else -1)
    x_wins = [0.0] * len(states)
    o_wins = [0.0] * len(states)
    for i in reversed(range(len(states))):  # children are solved before parents
        if terminal[i] is not None:
            x_wins[i], o_wins[i] = float(terminal[i] == 1), float(terminal[i] == -1)
        else:
            kids = children[i]
            x_wins[i] = sum(x_wins[k] for k in kids) / len(kids)
            o_wins[i] = sum(o_wins[k] for k in kids) / len(kids)
    decisive = [x + o for x, o in zip(x_wins, o_wins)]
    return _Tables(index, children, moves, terminal, mover_sign, x_wins, decisive)


def warm_up() -> None:
    """Build the position tables now (~0.1 s, once per process) rather than
    inside the first move, e.g. before timing moves."""
    _tables()


@lru_cache(maxsize=16)
def _uct_tables(num_simulations: int, uct_c: float) -> tuple[list[float], list[float], list[float]]:
    """``c * sqrt(ln n)``, ``1 / n`` and ``1 / sqrt(n)`` for n = 0..sims + 1, so
    a UCT value is two multiplications and an add."""
    size = num_simulations + 2
    explore = [0.0] + [uct_c * math.sqrt(math.log(n)) for n in range(1, size)]
    inverse = [0.0] + [1.0 / n for n in range(1, size)]
    inverse_sqrt = [0.0] + [1.0 / math.sqrt(n) for n in range(1, size)]
    return explore, inverse, inverse_sqrt


def fast_mcts_move(
    state: TicTacToeState,
    num_simulations: int,
    uct_c: float,
    solver: bool,
    rng: np.random.Generator,
) -> int:
    """The move of a UCT search from a Tic-Tac-Toe ``state`` (fast; same
    algorithm and move distribution as ``reference_mcts_move``)."""
    _check_search_args(num_simulations, uct_c)
    check_generator(rng, "fast_mcts_move")
    tables = _tables()
    root_state = tables.index.get(state.board)
    if root_state is None or tables.terminal[root_state] is not None:
        raise ValueError(f"fast_mcts_move needs a non-terminal reachable board, got {state.board}")
    return _search(tables, root_state, num_simulations, uct_c, solver, rng)


def _search(
    tables: _Tables,
    root_state: int,
    num_simulations: int,
    uct_c: float,
    solver: bool,
    rng: np.random.Generator,
) -> int:
    """The search loop on flat lists (node 0 is the root; a node's children
    occupy ids ``first[i] .. first[i] + count[i] - 1``). Selection, evaluation and
    backup stay inline on purpose: locals are CPython's fastest, and a helper call
    per tree step would roughly double the time per simulation; only the expansion
    (at most once per simulation) and the final choice are helpers."""
    kids_of, moves_of, terminal = tables.children, tables.moves, tables.terminal
    sign_of, x_wins, decisive = tables.mover_sign, tables.rollout_x_wins, tables.rollout_decisive
    explore, inverse, inverse_sqrt = _uct_tables(num_simulations, uct_c)

    capacity = 1 + 9 * num_simulations
    node_state, node_move, visits, count, tried = ([0] * capacity for _ in range(5))
    total = [0.0] * capacity
    outcome: list[Any] = [None] * capacity  # proven value for the mover, or None
    first = [-1] * capacity
    node_state[0] = root_state
    num_nodes = 1
    uniforms: list[float] = []
    next_uniform = 0

    for _ in range(num_simulations):
        node, s, path = 0, root_state, [0]
        while terminal[s] is None and visits[node]:  # selection
            start = first[node]
            if start < 0:  # expand on the second visit, children shuffled
                start, k = num_nodes, len(kids_of[s])
                num_nodes += k
                first[node], count[node] = start, k
                uniforms, next_uniform = _expand(kids_of[s], moves_of[s], start, node_state, node_move,
                                                 uniforms, next_uniform, rng)
            t = tried[node]
            if t < count[node]:  # unvisited children first, in shuffled order
                tried[node] = t + 1
                node = start + t
            else:
                e = explore[visits[node]]
                best_value = -math.inf
                for child in range(start, start + t):
                    proven = outcome[child]
                    if proven is None:
                        n = visits[child]
                        value = total[child] * inverse[n] + e * inverse_sqrt[n]
                    else:
                        value = proven
                    if value > best_value:
                        best_value, node = value, child
            s = node_state[node]
            path.append(node)

        result = terminal[s]  # evaluation: the game's result, or one rollout
        if result is not None:
            outcome[node] = result * sign_of[s]
            solved = solver
        else:
            if next_uniform >= len(uniforms):
                uniforms, next_uniform = rng.random(_UNIFORM_BATCH).tolist(), 0
            u = uniforms[next_uniform]
            next_uniform += 1
            result = 1 if u < x_wins[s] else (-1 if u < decisive[s] else 0)
            solved = False

        for node in reversed(path):  # backup, with the MCTS-Solver
            visits[node] += 1
            total[node] += result * sign_of[node_state[node]]
            if solved:
                start = first[node]
                if start >= 0:
                    solved = _solve_flat(outcome, node, start, start + count[node])
        if outcome[0] is not None:
            break

    return node_move[_best_root_child(first[0], count[0], outcome, visits, total)]


def _expand(
    kids: tuple[int, ...],
    moves: tuple[int, ...],
    start: int,
    node_state: list[int],
    node_move: list[int],
    uniforms: list[float],
    next_uniform: int,
    rng: np.random.Generator,
) -> tuple[list[float], int]:
    """Write a node's children at ids ``start ..`` in a random order (Fisher-Yates
    as numpy's shuffle, on the batched uniforms); returns the batch and its next
    unused index, as the search keeps them in locals."""
    k = len(kids)
    if next_uniform + k > len(uniforms):
        uniforms, next_uniform = rng.random(_UNIFORM_BATCH).tolist(), 0
    order = list(range(k))
    for i in range(k - 1, 0, -1):  # Fisher-Yates, as numpy's shuffle
        j = int(uniforms[next_uniform] * (i + 1))
        next_uniform += 1
        order[i], order[j] = order[j], order[i]
    node_state[start:start + k] = [kids[o] for o in order]
    node_move[start:start + k] = [moves[o] for o in order]
    return uniforms, next_uniform


def _best_root_child(
    start: int, count: int, outcome: list[Any], visits: list[int], total: list[float]
) -> int:
    """The root's child to play: by (proven value or 0, visits, total reward)."""
    return max(
        range(start, start + count),
        key=lambda c: (0 if outcome[c] is None else outcome[c], visits[c], total[c]),
    )


def _solve_flat(outcome: list[Any], node: int, start: int, stop: int) -> bool:
    """MCTS-Solver backup on the flat tree: children's outcomes are for the
    player choosing at ``node``; the node's own is the negation (zero-sum)."""
    best = None
    all_solved = True
    for child in range(start, stop):
        proven = outcome[child]
        if proven is None:
            all_solved = False
        elif best is None or proven > best:
            best = proven
    if best is not None and (all_solved or best == 1):
        outcome[node] = -best
        return True
    return False


# ----------------------------------------------------------------------------
# The opponent.
# ----------------------------------------------------------------------------


class MCTSPlayer:
    """UCT + MCTS-Solver opponent (docs/method.md section 7: MCTS-100 in training,
    MCTS-1000 unseen). Uses the fast search on Tic-Tac-Toe states and the
    reference search on any other deterministic two-player ``GameState``."""

    def __init__(
        self, name: str, num_simulations: int, uct_c: float = 1.4, solver: bool = True
    ) -> None:
        _check_search_args(num_simulations, uct_c)
        self.name = name
        self.num_simulations = num_simulations
        self.uct_c = float(uct_c)
        self.solver = bool(solver)

    def act(self, state: GameState, rng: np.random.Generator) -> int:
        check_generator(rng, f"MCTSPlayer({self.name!r}).act")
        legal = state.legal_moves()
        if len(legal) == 1:  # forced: the search could only return this move
            return int(legal[0])
        if isinstance(state, TicTacToeState):
            return fast_mcts_move(state, self.num_simulations, self.uct_c, self.solver, rng)
        return reference_mcts_move(state, self.num_simulations, self.uct_c, self.solver, rng)

    def __repr__(self) -> str:
        return (
            f"MCTSPlayer(name={self.name!r}, num_simulations={self.num_simulations}, "
            f"uct_c={self.uct_c}, solver={self.solver})"
        )
