"""Opponents by name: one grammar shared by params.yaml, the CLI and the code.

Names (``<family>`` or ``<family>-<parameter>``):

=============  ===================================================================
tic_tac_toe    ``random``, ``minimax``, ``mcts-<simulations>``, ``pattern-<order>``
               with order one of ``PATTERN_ORDERS``, and ``<family>-<i>``, the
               members of the generated families of ``opponents.ttt_families``
               (``mage_core.opponents.ttt_families``)
kuhn_poker     ``random``, ``conservative``, ``aggressive``, ``intermediate``,
               ``tight_caller``, ``calling_station`` (the exploration pair),
               ``equilibrium-<alpha>`` (alpha a fraction in [0, 1/3], e.g. ``1/6``),
               ``cfr`` (sampled CFR average strategy), ``cfr_argmax`` (its argmax:
               what the reference code calls CFR), every behaviour strategy
               defined under ``opponents.kuhn_strategies`` in params.yaml, and
               ``<family>-<i>``, the members of the generated families of
               ``opponents.kuhn_families`` (``mage_core.opponents.kuhn_families``)
=============  ===================================================================

``check_opponent_name`` only parses (cheap, used by config validation);
``make_opponent`` builds the player, importing its module on demand.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Callable, Mapping

from mage_core.envs.base import Opponent

#: The six preferred-pattern players of docs/method.md section 7 (orders live in
#: mage_core.opponents.patterns.PATTERNS; this tuple names them for the parser).
PATTERN_ORDERS = (
    "center_corners_edges",
    "corners",
    "edges",
    "diagonal",
    "anti_diagonal",
    "corners_bottom_right",
)
KUHN_ARCHETYPES = ("conservative", "aggressive", "intermediate")
#: The exploration pair (``kuhn.PROBES``): alike until they answer a bet.
KUHN_PROBES = ("tight_caller", "calling_station")
#: The playing styles (``kuhn.STYLES``) that the ``diverse`` prior mixes.
KUHN_STYLES = ("maniac", "station", "polar_bluffer", "trapper")

_MCTS = re.compile(r"^mcts-(\d+)$")
_PATTERN = re.compile(r"^pattern-([a-z_]+)$")
_EQUILIBRIUM = re.compile(r"^equilibrium-(\d+(?:/\d+)?|\d*\.\d+)$")


@dataclass(frozen=True)
class OpponentSettings:
    """Knobs shared by every opponent of a family (from ``opponents`` in params)."""

    mcts_uct_c: float = 1.4
    mcts_solver: bool = True
    cfr_iterations: int = 10_000
    kuhn_strategies: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    #: Tic-Tac-Toe players by name (``ttt_families.member`` specs): generated families' members.
    ttt_players: Mapping[str, Mapping[str, object]] = field(default_factory=dict)

    def custom(self, game: str) -> Mapping[str, object]:
        """The user-defined opponent names of ``game``."""
        return getattr(self, catalogue(game).custom_field)


@dataclass(frozen=True)
class Catalogue:
    """The opponents of one two-player game (its ``Task.opponents`` names this object).

    ``names(custom)``: accepted names for error messages; ``check(name, custom)``: None if
    ``name`` (not ``random``, which every game has) is valid, a reason if it is malformed,
    ``UNKNOWN`` if the game has no such opponent; ``make(name, settings)`` builds it;
    ``custom_field``: the ``OpponentSettings`` field holding user-defined names."""

    custom_field: str
    names: Callable[[Mapping[str, object]], list[str]]
    check: Callable[[str, Mapping[str, object]], str | None]
    make: Callable[[str, "OpponentSettings"], Opponent]


#: ``Catalogue.check``'s answer for a name the game does not know.
UNKNOWN = "unknown"


def catalogue(game: str) -> Catalogue:
    """The opponent catalogue of ``game``; ValueError for a game without opponents."""
    from mage_core.envs.registry import TASKS, resolve, task, two_player_games

    reference = task(game).opponents if game in TASKS else None
    if reference is None:
        raise ValueError(f"game {game!r} has no opponents; two-player games: {', '.join(two_player_games())}")
    return resolve(reference)


def valid_names(game: str, custom: Mapping[str, object] = {}) -> list[str]:
    """Human-readable list of accepted names, for error messages."""
    return catalogue(game).names(custom)


def _ttt_names(custom: Mapping[str, object]) -> list[str]:
    return (["random", "minimax", "mcts-<simulations>"] + [f"pattern-{p}" for p in PATTERN_ORDERS]
            + _collapse_members(custom))


def _kuhn_names(custom: Mapping[str, object]) -> list[str]:
    return ["random", *KUHN_ARCHETYPES, *KUHN_PROBES, *KUHN_STYLES, "equilibrium-<alpha in [0,1/3]>", "cfr", "cfr_argmax",
            *_collapse_members(custom)]


def _collapse_members(names: Mapping[str, object]) -> list[str]:
    """Custom names with a generated family's members shown as one range: ``f``, ``f-<0..63>``."""
    counts: dict[str, int] = {}
    for name in names:
        family, _, index = name.rpartition("-")
        if family in names and index.isdigit():
            counts[family] = counts.get(family, 0) + 1
    out = []
    for name in names:
        family, _, index = name.rpartition("-")
        if family in counts and index.isdigit():
            continue
        out.append(name)
        if name in counts:
            out.append(f"{name}-<0..{counts[name] - 1}>")
    return out


def check_opponent_name(game: str, name: str, custom: Mapping[str, object] = {}) -> str | None:
    """None if ``name`` is a valid opponent of ``game``, else the reason it is not."""
    try:
        found = catalogue(game)
    except ValueError as err:
        return str(err)
    if not isinstance(name, str):
        return f"opponent name must be a string, got {type(name).__name__}"
    if name == "random":
        return None
    problem = found.check(name, custom)
    if problem != UNKNOWN:
        return problem
    return f"{name!r} is not an opponent of {game}; valid: {', '.join(valid_names(game, custom))}"


def _ttt_check(name: str, custom: Mapping[str, object]) -> str | None:
    if name == "minimax" or name in custom:
        return None
    if m := _MCTS.match(name):
        # The first simulation only expands the root, so one simulation chooses
        # nothing (OpenSpiel's MCTSBot fails there too).
        return None if int(m.group(1)) >= 2 else "mcts needs at least 2 simulations"
    if m := _PATTERN.match(name):
        if m.group(1) in PATTERN_ORDERS:
            return None
        return f"unknown pattern {m.group(1)!r}; patterns: {', '.join(PATTERN_ORDERS)}"
    return UNKNOWN


def _kuhn_check(name: str, custom: Mapping[str, object]) -> str | None:
    if (name in KUHN_ARCHETYPES or name in KUHN_PROBES or name in KUHN_STYLES or name in ("cfr", "cfr_argmax")
            or name in custom):
        return None
    if m := _EQUILIBRIUM.match(name):
        alpha = _parse_alpha(m.group(1))
        if alpha is None or not 0 <= alpha <= Fraction(1, 3):
            return f"equilibrium alpha must lie in [0, 1/3], got {m.group(1)}"
        return None
    return UNKNOWN


def _parse_alpha(text: str) -> Fraction | None:
    try:
        return Fraction(text)
    except (ValueError, ZeroDivisionError):
        return None


def make_opponent(game: str, name: str, settings: OpponentSettings = OpponentSettings()) -> Opponent:
    """Build the named opponent; raises ValueError listing valid names."""
    problem = check_opponent_name(game, name, settings.custom(game))
    if problem is not None:
        raise ValueError(problem)
    return catalogue(game).make(name, settings)


def _make_tic_tac_toe(name: str, settings: OpponentSettings) -> Opponent:
    if name == "random":
        from mage_core.opponents.random_player import UniformRandom

        return UniformRandom()
    if name == "minimax":
        from mage_core.opponents.minimax import MinimaxPlayer

        return MinimaxPlayer(name="minimax")
    if name in settings.ttt_players:
        return _make_generated(name, settings.ttt_players[name], settings)
    if m := _MCTS.match(name):
        from mage_core.opponents.mcts import MCTSPlayer

        return MCTSPlayer(
            name=name,
            num_simulations=int(m.group(1)),
            uct_c=settings.mcts_uct_c,
            solver=settings.mcts_solver,
        )
    m = _PATTERN.match(name)
    assert m is not None  # guaranteed by check_opponent_name
    from mage_core.opponents.patterns import PATTERNS, PatternPlayer

    return PatternPlayer(name=name, order=PATTERNS[m.group(1)])


def _make_generated(name: str, spec: Mapping[str, object], settings: OpponentSettings) -> Opponent:
    """A generated Tic-Tac-Toe family's member (``mage_core.opponents.ttt_families``)."""
    from mage_core.opponents.ttt_families import NoisyPlayer

    inner: Opponent
    if spec["kind"] == "pattern":
        from mage_core.opponents.patterns import PatternPlayer

        inner = PatternPlayer(name=name, order=spec["order"])  # type: ignore[arg-type]
    else:
        from mage_core.opponents.mcts import MCTSPlayer

        inner = MCTSPlayer(name=name, num_simulations=int(spec["simulations"]),  # type: ignore[call-overload]
                           uct_c=settings.mcts_uct_c, solver=settings.mcts_solver)
    noise = float(spec.get("noise", 0.0))  # type: ignore[arg-type]
    return NoisyPlayer(name, inner, noise) if noise > 0 else inner


def _make_kuhn(name: str, settings: OpponentSettings) -> Opponent:
    from mage_core.opponents import kuhn

    # Every Kuhn opponent is a behaviour strategy, so the exact analysis
    # (mage_core.envs.kuhn_poker.analysis) applies to all of them.
    if name == "random":
        return kuhn.uniform_random()
    if name in KUHN_ARCHETYPES:
        return kuhn.ARCHETYPES[name]
    if name in KUHN_PROBES:
        return kuhn.PROBES[name]
    if name in KUHN_STYLES:
        return kuhn.STYLES[name]
    if name in settings.kuhn_strategies:
        return kuhn.BehaviourStrategy(name, settings.kuhn_strategies[name])
    if name in ("cfr", "cfr_argmax"):
        from mage_core.opponents import cfr

        if name == "cfr":
            return cfr.cfr_strategy(settings.cfr_iterations)
        return cfr.cfr_argmax_strategy(settings.cfr_iterations)
    m = _EQUILIBRIUM.match(name)
    assert m is not None  # guaranteed by check_opponent_name
    strategy = kuhn.equilibrium(Fraction(m.group(1)))
    return kuhn.BehaviourStrategy(name, strategy.p_bet)


TIC_TAC_TOE = Catalogue("ttt_players", _ttt_names, _ttt_check, _make_tic_tac_toe)
KUHN_POKER = Catalogue("kuhn_strategies", _kuhn_names, _kuhn_check, _make_kuhn)
