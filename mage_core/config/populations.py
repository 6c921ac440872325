"""``opponents``, ``population``, ``evaluation.ood`` and ``tournament`` of params.yaml:
the two-player games' opponents (built-in, user-defined strategies, generated families),
who the agent trains against, the out-of-domain suites of every task, and head-to-head
matches. Opponent names are checked against each game's catalogue
(``mage_core.opponents.registry``), with the file's own strategies and family members
passed in by ``parse_config`` as validation context."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Mapping, Sequence, Union

from pydantic import (
    AfterValidator,
    Field,
    StringConstraints,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)

from mage_core.config.tasks import GAMES, TwoPlayerGame
from mage_core.envs.registry import resolve, task
from mage_core.opponents.families import member_name
from mage_core.opponents.kuhn_families import DIVERSE_STYLES, KuhnFamily
from mage_core.opponents.kuhn_families import members as family_members
from mage_core.opponents.population import PRESETS, PopulationEntry, preset
from mage_core.opponents.registry import OpponentSettings, check_opponent_name
from mage_core.opponents.ttt_families import TicTacToeFamily
from mage_core.opponents.ttt_families import members as ttt_members
from mage_core.schema import NonNegativeInt, PositiveInt, Probability, Strict


class KuhnStrategyConfig(Strict):
    """P(BET) at each of the 12 Kuhn information sets (card + betting so far).

    Player 0 (acts first): J, Q, K, and Jpb, Qpb, Kpb after check-bet.
    Player 1: Jp, Qp, Kp after a check; Jb, Qb, Kb facing a bet.
    """

    J: Probability
    Q: Probability
    K: Probability
    Jpb: Probability
    Qpb: Probability
    Kpb: Probability
    Jp: Probability
    Qp: Probability
    Kp: Probability
    Jb: Probability
    Qb: Probability
    Kb: Probability


class KuhnFamilyConfig(Strict):
    """A generated family of Kuhn opponents (``mage_core.opponents.kuhn_families``):
    ``count`` behaviour strategies ``<family>-<i>``, each information set's P(BET)
    drawn from Beta(alpha, beta) and rounded to a multiple of 1/grid, member i from
    its own stream seeded by (seed, i). A population entry or an OOD suite naming
    the family stands for all its members, the entry's weight split evenly."""

    count: Annotated[int, Field(ge=1, le=4096)]
    seed: NonNegativeInt = 0
    prior: Literal["beta", "styles"] = "beta"
    alpha: Annotated[float, Field(gt=0)] = 1.0
    beta: Annotated[float, Field(gt=0)] = 1.0
    grid: Annotated[int, Field(ge=1, le=10_000)] = 100
    #: prior styles: the built-in styles mixed two at a time (default: the ``diverse`` six).
    styles: tuple[str, ...] = DIVERSE_STYLES

    @model_validator(mode="after")
    def _valid_family(self) -> "KuhnFamilyConfig":
        self.family()  # its ValueError names the field
        return self

    def family(self) -> KuhnFamily:
        return KuhnFamily(**self.model_dump())


class TicTacToeFamilyConfig(Strict):
    """A generated family of Tic-Tac-Toe opponents (``mage_core.opponents.ttt_families``):
    ``count`` players ``<family>-<i>`` of one ``kind``: ``pattern`` (a random order of
    the nine cells each) or ``mcts`` (a simulation budget each, log-uniform over
    ``simulations``), each playing a random move with its own probability drawn
    uniformly from ``noise``. Member i is drawn from its own stream (seed, i)."""

    count: Annotated[int, Field(ge=1, le=4096)]
    seed: NonNegativeInt = 0
    kind: Literal["pattern", "mcts"] = "pattern"
    simulations: tuple[Annotated[int, Field(ge=2, le=100_000)], Annotated[int, Field(ge=2, le=100_000)]] = (10, 1000)
    noise: tuple[Annotated[float, Field(ge=0, le=1)], Annotated[float, Field(ge=0, le=1)]] = (0.0, 0.0)

    @model_validator(mode="after")
    def _ordered(self) -> "TicTacToeFamilyConfig":
        problems = [f"{key} must be [low, high] with low <= high, got {list(getattr(self, key))}"
                    for key in ("simulations", "noise") if getattr(self, key)[0] > getattr(self, key)[1]]
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def family(self) -> TicTacToeFamily:
        return TicTacToeFamily(**self.model_dump())


#: A family's name: members are ``<name>-<i>``.
FamilyName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$")]


class OpponentsConfig(Strict):
    mcts_uct_c: Annotated[float, Field(gt=0)] = 1.4
    mcts_solver: bool = True
    cfr_iterations: PositiveInt = 10_000
    kuhn_strategies: dict[str, KuhnStrategyConfig] = {}
    kuhn_families: dict[FamilyName, KuhnFamilyConfig] = {}
    ttt_families: dict[FamilyName, TicTacToeFamilyConfig] = {}
    #: Named populations: name -> entries (an entry may name a family); a population key or an
    #: OOD suite may give the name instead of the list. The entries are checked where the name
    #: is used (as that key's entries), so a named population that nothing uses does not stop a
    #: run whose families were replaced.
    kuhn_populations: dict[FamilyName, list[dict[str, Any]]] = {}
    ttt_populations: dict[FamilyName, list[dict[str, Any]]] = {}

    @field_validator("kuhn_populations", "ttt_populations")
    @classmethod
    def _populations(cls, v: dict[str, list[Any]], info: ValidationInfo) -> dict[str, list[Any]]:
        game = "kuhn_poker" if info.field_name == "kuhn_populations" else "tic_tac_toe"
        problems = []
        for name, entries in v.items():
            taken = [f"the population preset {name}"] if name in PRESETS[game] else []
            taken += [f"the family {name}"] if name in _families(info, game) else []
            taken += ([f"the opponent {name}"] if check_opponent_name(game, name) is None
                      or (name in _custom_names(info, game) and name not in _families(info, game)) else [])
            if taken:
                problems.append(f"{info.field_name}.{name}: the name clashes with {', '.join(taken)}; "
                                "choose another name")
            if not entries:
                problems.append(f"{info.field_name}.{name}: a population needs at least one entry")
        if problems:
            raise ValueError("; ".join(problems))
        return v

    @field_validator("kuhn_strategies")
    @classmethod
    def _no_shadowing(cls, v: dict[str, KuhnStrategyConfig]) -> dict[str, KuhnStrategyConfig]:
        shadowing = [name for name in v if check_opponent_name("kuhn_poker", name) is None]
        if shadowing:
            raise ValueError(f"{shadowing} shadow built-in opponents; choose other names")
        return v

    @model_validator(mode="after")
    def _families_named_apart(self) -> "OpponentsConfig":
        problems = []
        for name, spec in self.kuhn_families.items():
            names = (name, *(member_name(name, i) for i in range(spec.count)))
            taken = [n for n in names if check_opponent_name("kuhn_poker", n) is None or n in self.kuhn_strategies]
            taken += [f"the population preset {name}"] if name in PRESETS["kuhn_poker"] else []
            if taken:
                problems.append(f"kuhn_families.{name}: its names ({name}, {member_name(name, 0)} .. "
                                f"{member_name(name, spec.count - 1)}) clash with {', '.join(taken)}; choose another name")
        for name, ttt in self.ttt_families.items():
            names = (name, *(member_name(name, i) for i in range(ttt.count)))
            taken = [n for n in names if check_opponent_name("tic_tac_toe", n) is None]
            taken += [f"the population preset {name}"] if name in PRESETS["tic_tac_toe"] else []
            if taken:
                problems.append(f"ttt_families.{name}: its names ({name}, {member_name(name, 0)} .. "
                                f"{member_name(name, ttt.count - 1)}) clash with {', '.join(taken)}; "
                                "choose another name")
        if problems:  # (two families never share a name: a family's name has no "-")
            raise ValueError("; ".join(problems))
        return self

    def settings(self) -> OpponentSettings:
        strategies: dict[str, Any] = {name: s.model_dump() for name, s in self.kuhn_strategies.items()}
        for name, spec in self.kuhn_families.items():
            strategies.update(family_members(name, spec.family()))
        players: dict[str, Any] = {}
        for name, ttt in self.ttt_families.items():
            players.update(ttt_members(name, ttt.family()))
        return OpponentSettings(
            mcts_uct_c=self.mcts_uct_c,
            mcts_solver=self.mcts_solver,
            cfr_iterations=self.cfr_iterations,
            kuhn_strategies=strategies,
            ttt_players=players,
        )


def expand_families(entries: Sequence[Any], families: Mapping[str, int], make: Any) -> list[Any]:
    """Population entries with every entry naming a family replaced by one entry per
    member (``make(opponent, weight, seat)``), the weight split evenly; others kept."""
    out = []
    for e in entries:
        count = families.get(e.opponent)
        if count is None:
            out.append(e)
        else:
            out += [make(member_name(e.opponent, i), e.weight / count, e.seat) for i in range(count)]
    return out


class PopulationEntryConfig(Strict):
    opponent: str
    weight: Annotated[float, Field(gt=0)] = 1.0
    seat: Literal["first", "second", "mixed"] = "mixed"

    # Subclasses name their game so that opponent names are checked per entry,
    # next to the entry's other errors.
    game: ClassVar[str]

    @field_validator("opponent")
    @classmethod
    def _known(cls, v: str, info: ValidationInfo) -> str:
        if (problem := check_opponent_name(cls.game, v, _custom_names(info, cls.game))) is not None:
            raise ValueError(problem)
        return v


class TicTacToeEntry(PopulationEntryConfig):
    game: ClassVar[str] = "tic_tac_toe"


class KuhnPokerEntry(PopulationEntryConfig):
    game: ClassVar[str] = "kuhn_poker"


#: parse_config's context keys of each game's user-defined names and family sizes.
_CONTEXT = {"kuhn_poker": ("kuhn_strategies", "kuhn_families"), "tic_tac_toe": ("ttt_players", "ttt_families")}


def _custom_names(info: ValidationInfo, game: str) -> Mapping[str, Any]:
    return (info.context or {}).get(_CONTEXT[game][0], {})


def _families(info: ValidationInfo, game: str) -> Mapping[str, int]:
    return (info.context or {}).get(_CONTEXT[game][1], {})


#: parse_config's context key of each game's named populations (``opponents.*_populations``).
_NAMED = {"kuhn_poker": "kuhn_populations", "tic_tac_toe": "ttt_populations"}


def _family_as_entries(spec: Any, info: ValidationInfo, game: str = "kuhn_poker") -> Any:
    """A population given as a family's name: the family, whole (one entry, weight 1); given
    as the name of a named population (``opponents.*_populations``): its entries."""
    if isinstance(spec, str) and spec in _families(info, game):
        return [{"opponent": spec}]
    named = (info.context or {}).get(_NAMED[game], {})
    if isinstance(spec, str) and spec in named:
        return list(named[spec])
    return spec


def _kuhn_entry(opponent: str, weight: float, seat: str) -> KuhnPokerEntry:
    """A family member's entry (its name is valid by construction)."""
    return KuhnPokerEntry.model_construct(opponent=opponent, weight=weight, seat=seat)


def _ttt_entry(opponent: str, weight: float, seat: str) -> TicTacToeEntry:
    return TicTacToeEntry.model_construct(opponent=opponent, weight=weight, seat=seat)


def _check_preset(game: str, spec: Any, info: ValidationInfo | None = None) -> Any:
    if isinstance(spec, str):
        try:
            preset(game, spec)
        except ValueError as err:
            others = ""
            if info is not None:
                families = ", ".join(_families(info, game)) or "none"
                named = ", ".join((info.context or {}).get(_NAMED[game], {})) or "none"
                others = (f"; families (opponents.{_CONTEXT[game][1]}): {families}; named populations "
                          f"(opponents.{_NAMED[game]}): {named}")
            raise ValueError(f"{err}{others}") from None
    return spec


class PopulationConfig(Strict):
    """A preset name (see mage_core.opponents.population.PRESETS) or explicit entries."""

    tic_tac_toe: Union[str, list[TicTacToeEntry]] = "balanced"
    kuhn_poker: Union[str, list[KuhnPokerEntry]] = "paper"

    @field_validator("tic_tac_toe", mode="before")
    @classmethod
    def _ttt_family_name(cls, v: Any, info: ValidationInfo) -> Any:
        return _family_as_entries(v, info, "tic_tac_toe")

    @field_validator("tic_tac_toe")
    @classmethod
    def _ttt(cls, v: Any, info: ValidationInfo) -> Any:
        if isinstance(v, list):  # a family stands for its members
            return expand_families(v, _families(info, "tic_tac_toe"), _ttt_entry)
        return _check_preset("tic_tac_toe", v, info)

    @field_validator("kuhn_poker", mode="before")
    @classmethod
    def _family_name(cls, v: Any, info: ValidationInfo) -> Any:
        return _family_as_entries(v, info)

    @field_validator("kuhn_poker")
    @classmethod
    def _kuhn(cls, v: Any, info: ValidationInfo) -> Any:
        if isinstance(v, list):  # a family stands for its members
            return expand_families(v, (info.context or {}).get("kuhn_families", {}), _kuhn_entry)
        return _check_preset("kuhn_poker", v, info)

    def entries(self, game: TwoPlayerGame) -> list[PopulationEntry]:
        spec = getattr(self, game)
        if isinstance(spec, str):
            return preset(game, spec)
        return [PopulationEntry(e.opponent, e.weight, e.seat) for e in spec]


#: An evaluation suite's name: reported as ``ood_<name>``.
SuiteName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9_]+$")]
TicTacToePreset = Annotated[str, AfterValidator(lambda v: _check_preset("tic_tac_toe", v))]
KuhnPokerPreset = Annotated[str, AfterValidator(lambda v: _check_preset("kuhn_poker", v))]


class _OpponentSuites(Strict):
    """Out-of-domain evaluation suites per game (docs/method.md section 8), each named
    (reported as ``ood_<name>``): a population (preset name or entries) for the
    two-player games; for a single-agent task, what its ``Task.ood_suite`` declares (a
    number of boxes for Sokoban, a split for WebShop and ALFWorld)."""

    tic_tac_toe: dict[SuiteName, Union[TicTacToePreset, list[TicTacToeEntry]]] = {"mcts_1000": "held_out"}
    kuhn_poker: dict[SuiteName, Union[KuhnPokerPreset, list[KuhnPokerEntry]]] = {
        "cfr": "held_out", "cfr_argmax": [KuhnPokerEntry(opponent="cfr_argmax")]}

    @field_validator("kuhn_poker", mode="before")
    @classmethod
    def _family_names(cls, v: Any, info: ValidationInfo) -> Any:
        return {name: _family_as_entries(spec, info) for name, spec in v.items()} if isinstance(v, dict) else v

    @field_validator("tic_tac_toe", mode="before")
    @classmethod
    def _ttt_family_names(cls, v: Any, info: ValidationInfo) -> Any:
        return ({name: _family_as_entries(spec, info, "tic_tac_toe") for name, spec in v.items()}
                if isinstance(v, dict) else v)

    @field_validator("tic_tac_toe")
    @classmethod
    def _ttt_families(cls, v: Any, info: ValidationInfo) -> Any:
        families = _families(info, "tic_tac_toe")
        return {name: expand_families(spec, families, _ttt_entry) if isinstance(spec, list) else spec
                for name, spec in v.items()}

    @field_validator("kuhn_poker")
    @classmethod
    def _kuhn_families(cls, v: Any, info: ValidationInfo) -> Any:
        families = (info.context or {}).get("kuhn_families", {})
        return {name: expand_families(spec, families, _kuhn_entry) if isinstance(spec, list) else spec
                for name, spec in v.items()}

    def entries(self, game: TwoPlayerGame, name: str) -> list[PopulationEntry]:
        spec = getattr(self, game)[name]
        if isinstance(spec, str):
            return preset(game, spec)
        return [PopulationEntry(e.opponent, e.weight, e.seat) for e in spec]


def _suites_field(game: str) -> tuple[Any, Any]:
    suite = resolve(task(game).ood_suite)
    defaults = {name: suite(**fields) for name, fields in task(game).ood_defaults.items()}
    return dict[SuiteName, suite], defaults  # type: ignore[valid-type]


OodSuitesConfig = create_model(
    "OodSuitesConfig", __base__=_OpponentSuites, __module__=__name__,
    **{game: _suites_field(game) for game in GAMES if task(game).ood_suite is not None},
)


class MatchConfig(Strict):
    game: TwoPlayerGame
    player_a: str
    player_b: str
    num_games: PositiveInt = 200

    @field_validator("player_a", "player_b")
    @classmethod
    def _known(cls, v: str, info: ValidationInfo) -> str:
        game = info.data.get("game")
        if game is not None:
            if (p := check_opponent_name(game, v, _custom_names(info, game))) is not None:
                raise ValueError(p)
        return v


class TournamentConfig(Strict):
    matches: list[MatchConfig] = []


