"""The schema of ``params.yaml`` and its loader.

Validate at the edge, then trust the types (docs/architecture.md, style rule 3): loading
reports ALL problems at once, each with its dotted key and what is allowed,
and the CLI exits with status 2 before anything is written. Unknown keys are
errors, so a typo never silently falls back to a default.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Mapping, Sequence, Union

from pydantic import (
    AfterValidator,
    Field,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)

from mage_core.envs.registry import GAMES, games_with, resolve, task
from mage_core.opponents.families import member_name
from mage_core.opponents.kuhn_families import KuhnFamily
from mage_core.opponents.kuhn_families import members as family_members
from mage_core.opponents.ttt_families import TicTacToeFamily
from mage_core.opponents.ttt_families import members as ttt_members
from mage_core.opponents.population import PRESETS, PopulationEntry, preset
from mage_core.opponents.registry import OpponentSettings, check_opponent_name
from mage_core.schema import NonNegativeInt, PositiveInt, Probability, Strict
from mage_core.trainers.presets import PRESET_POPULATIONS
from mage_core.trainers.settings import (
    AlgorithmConfig,
    BackendConfig,
    EvaluationConfig,
    ModelConfig,
    PolicyConfig,
    RolloutConfig,
    TrainConfig,
)

GameName = Literal[GAMES]  # type: ignore[valid-type]  # the registry's names (mage_core.envs.registry)
TwoPlayerGame = Literal["tic_tac_toe", "kuhn_poker"]


def _env_field(game: str) -> tuple[Any, Any]:
    section = resolve(task(game).params)
    return section, section()


#: ``env``: the game trained on and one section per task, each the class its task declares
#: (``Task.params``, in the task's folder: ``envs/<name>/params.py``).
EnvConfig = create_model(
    "EnvConfig", __base__=Strict, __module__=__name__,
    name=(GameName, "kuhn_poker"),
    **{game: _env_field(game) for game in GAMES},
)


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
    prior: Literal["beta"] = "beta"
    alpha: Annotated[float, Field(gt=0)] = 1.0
    beta: Annotated[float, Field(gt=0)] = 1.0
    grid: Annotated[int, Field(ge=1, le=10_000)] = 100

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


def _family_as_entries(spec: Any, info: ValidationInfo, game: str = "kuhn_poker") -> Any:
    """A population given as a family's name: the family, whole (one entry, weight 1)."""
    if isinstance(spec, str) and spec in _families(info, game):
        return [{"opponent": spec}]
    return spec


def _kuhn_entry(opponent: str, weight: float, seat: str) -> KuhnPokerEntry:
    """A family member's entry (its name is valid by construction)."""
    return KuhnPokerEntry.model_construct(opponent=opponent, weight=weight, seat=seat)


def _ttt_entry(opponent: str, weight: float, seat: str) -> TicTacToeEntry:
    return TicTacToeEntry.model_construct(opponent=opponent, weight=weight, seat=seat)


def _check_preset(game: str, spec: Any) -> Any:
    if isinstance(spec, str):
        try:
            preset(game, spec)
        except ValueError as err:
            raise ValueError(str(err)) from None
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
        return _check_preset("tic_tac_toe", v)

    @field_validator("kuhn_poker", mode="before")
    @classmethod
    def _family_name(cls, v: Any, info: ValidationInfo) -> Any:
        return _family_as_entries(v, info)

    @field_validator("kuhn_poker")
    @classmethod
    def _kuhn(cls, v: Any, info: ValidationInfo) -> Any:
        if isinstance(v, list):  # a family stands for its members
            return expand_families(v, (info.context or {}).get("kuhn_families", {}), _kuhn_entry)
        return _check_preset("kuhn_poker", v)

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


class EvaluationSection(EvaluationConfig):
    """The fixed evaluation sets: in-domain (the training population) and out-of-domain."""

    ood: OodSuitesConfig = OodSuitesConfig()


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


class WebShopDataConfig(Strict):
    """The generated WebShop catalogue (``mage data generate webshop``)."""

    seed: NonNegativeInt = 0
    products_per_category: PositiveInt = 60
    instructions_per_product: PositiveInt = 3


class AlfWorldDataConfig(Strict):
    """The generated ALFWorld games (``mage data generate alfworld``): games per task type."""

    seed: NonNegativeInt = 0
    train: NonNegativeInt = 2
    valid_seen: NonNegativeInt = 1
    valid_unseen: NonNegativeInt = 1
    task_types: list[Literal["pick_and_place_simple", "look_at_obj_in_light", "pick_clean_then_place_in_recep",
                             "pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep",
                             "pick_two_obj_and_place"]] = Field(
        default_factory=lambda: ["pick_and_place_simple", "look_at_obj_in_light", "pick_clean_then_place_in_recep",
                                 "pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep",
                                 "pick_two_obj_and_place"], min_length=1)


class DataConfig(Strict):
    """Task data the project generates (the ``data@<name>`` DVC stages write ``data/<name>``)."""

    webshop: WebShopDataConfig = WebShopDataConfig()
    alfworld: AlfWorldDataConfig = AlfWorldDataConfig()


class RunConfig(Strict):
    """One training run of the reproduction: an environment, a method preset, and
    dotted-key overrides of its own (e.g. a smaller batch for a slow game)."""

    env: GameName
    method: str
    set: dict[str, Any] = {}

    @field_validator("method")
    @classmethod
    def _known(cls, v: str) -> str:
        from mage_core.trainers.presets import preset_values

        preset_values(v)  # raises with the valid names
        return v


RunName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9_-]+$")]
ProfileName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9_]+$")]


class ReproduceConfig(Strict):
    """The paper reproduction (dvc.yaml, `mage reproduce`): which runs, how long."""

    runs: dict[RunName, RunConfig] = {"kuhn_poker-mage": RunConfig(env="kuhn_poker", method="mage")}
    iterations: PositiveInt = 40
    eval_per_pair: PositiveInt = 200
    max_concurrent: PositiveInt = 1
    profiles: dict[ProfileName, dict[str, Any]] = {}


GridName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9_]+$")]


def _dotted_keys(values: Mapping[str, Any]) -> Mapping[str, Any]:
    bad = [key for key in values if not key or any(not part for part in key.split("."))]
    if bad:
        raise ValueError(f"{', '.join(map(repr, bad))}: not a dotted key such as train.learning_rate")
    return values


class GridConfig(Strict):
    """An ablation grid: dotted-key overrides every point shares (``set``) and the
    keys it varies (``vary``: key -> values); its points are the product of the
    ``vary`` lists, each a training run plus its evaluation (``mage sweep``)."""

    set: Annotated[dict[str, Any], AfterValidator(_dotted_keys)] = {}
    vary: dict[str, list[Any]]

    @field_validator("vary")
    @classmethod
    def _lists(cls, v: dict[str, list[Any]]) -> dict[str, list[Any]]:
        _dotted_keys(v)
        if not v:
            raise ValueError("name at least one key to vary, e.g. {algorithm.preset: [mage, lamer]}")
        for key, values in v.items():
            if not values:
                raise ValueError(f"{key}: give at least one value")
            if len({repr(value) for value in values}) != len(values):
                raise ValueError(f"{key}: a value is listed twice ({values})")
        return v


class SweepConfig(Strict):
    """Ablation grids (``mage sweep``): the paper's, by name, and how many points run at once."""

    max_concurrent: PositiveInt = 2
    grids: dict[GridName, GridConfig] = {}


class TrackingConfig(Strict):
    """Run tracking: every stage execution is an MLflow run when ``mlflow`` is on.
    The store is ``MLFLOW_TRACKING_URI``, else ``mlflow.db`` (sqlite) in the project.
    Off by default in the schema, so library use and tests write no store
    unless asked; the project's params.yaml turns it on."""

    mlflow: bool = False
    experiment: Annotated[str, StringConstraints(min_length=1)] = "mage"
    #: CPU, memory, disk and network of the machine (GPU where nvidia-ml-py sees one) as
    #: ``system/*`` metrics of every stage run, sampled every 10 s
    #: (``MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL``) plus once at its end.
    system_metrics: bool = True
    #: A trained run's ``best/`` as a version of the registered model ``mage-<env>-<method>``.
    register_models: bool = True
    #: Seconds a stage waits at its end for an unreachable store to take what is still queued
    #: (metrics are sent in the background: an outage never stops training; docs/faults.md).
    flush_timeout_s: Annotated[float, Field(ge=0)] = 60.0


class Config(Strict):
    """The whole of params.yaml."""

    seed: Annotated[int, Field(ge=0)] = 0
    env: EnvConfig = EnvConfig()
    opponents: OpponentsConfig = OpponentsConfig()
    population: PopulationConfig = PopulationConfig()
    tournament: TournamentConfig = TournamentConfig()
    model: ModelConfig = ModelConfig()
    policy: PolicyConfig = PolicyConfig()
    rollout: RolloutConfig = RolloutConfig()
    algorithm: AlgorithmConfig = AlgorithmConfig()
    train: TrainConfig = TrainConfig()
    backend: BackendConfig = BackendConfig()
    evaluation: EvaluationSection = EvaluationSection()
    tracking: TrackingConfig = TrackingConfig()
    reproduce: ReproduceConfig = ReproduceConfig()
    sweep: SweepConfig = SweepConfig()
    data: DataConfig = DataConfig()

    @model_validator(mode="before")
    @classmethod
    def _population_from_method(cls, data: Any) -> Any:
        """Population ablations name their populations; explicit keys win."""
        if not isinstance(data, dict):
            return data
        algorithm = data.get("algorithm")
        name = algorithm.get("preset", "mage") if isinstance(algorithm, dict) else "mage"
        implied = PRESET_POPULATIONS.get(name) if isinstance(name, str) else None
        if not implied:
            return data
        population = data.get("population") if isinstance(data.get("population"), dict) else {}
        return {**data, "population": {**implied, **population}}

    @model_validator(mode="before")
    @classmethod
    def _preset_for_game(cls, data: Any) -> Any:
        """The presets' per-game values for ``env.name`` (``Task.method_values``: gamma_traj
        0.9 on Sokoban, docs/method.md section 4); algorithm keys set explicitly win."""
        if not isinstance(data, dict):
            return data
        env, default = data.get("env"), EnvConfig.model_fields["name"].default
        game = env.get("name", default) if isinstance(env, dict) else getattr(env, "name", default)
        values = task(game).method_values if isinstance(game, str) and game in GAMES else None
        algorithm = data.get("algorithm", {})
        if not values or not isinstance(algorithm, dict):
            return data
        return {**data, "algorithm": {**values, **algorithm}}

    @model_validator(mode="after")
    def _league_plays_kuhn(self) -> "Config":
        if not self.train.league.every:
            return self
        problems = []
        if not task(self.env.name).strategy_probes:
            probed = ", ".join(games_with("strategy_probes"))
            problems.append(f"env.name {self.env.name}: the league reads the policy's first hand as a behaviour "
                            f"strategy (games where it can: {probed})")
        if self.policy.action_mode != "constrained":
            problems.append("policy.action_mode free: the league reads the policy's first hand from its "
                            "candidate scores (constrained actions)")
        if self.rollout.workers > 0:
            problems.append("rollout.workers > 0: Ray rollout workers hold the opponents they were started "
                            "with and would never meet the league; set rollout.workers: 0")
        if problems:
            raise ValueError("train.league.every > 0 needs: " + "; ".join(problems))
        return self

    @model_validator(mode="after")
    def _rollout_workers_copy_the_policy(self) -> "Config":
        if self.rollout.workers > 0 and self.backend.vllm_sleep:
            raise ValueError("backend.vllm_sleep: the vLLM engines of rollout.workers run on Ray actors, beside no "
                             "training step; set backend.vllm_sleep: false (or rollout.workers: 0)")
        if self.rollout.workers > 0 and self.backend.generator == "openai":
            raise ValueError("rollout.workers: Ray rollout workers each run a copy of the policy (HF or vLLM); "
                             "backend.generator openai is a served model with its own parallelism: set "
                             "rollout.workers: 0 (backend.openai.max_concurrency sets its parallel requests)")
        return self

    def vllm_engine(self) -> dict[str, Any]:
        """The arguments of every vLLM engine of a run (``VLLMGenerator``), in the stage's
        process or on a Ray rollout actor: bf16 training samples from bf16 weights, a
        local model keeps its own dtype, the embedded tiny model runs in float32."""
        b, m = self.backend, self.model
        dtype = "bfloat16" if b.precision == "bf16" else m.dtype if m.source == "local" else "float32"
        return {"dtype": dtype, "seed": self.seed, "gpu_memory_utilization": b.gpu_memory_utilization,
                "enable_sleep_mode": b.vllm_sleep}


class ConfigError(Exception):
    """Every problem found in a params file, one ``key: message`` per line."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        super().__init__(f"{source}: {len(problems)} problem(s)\n" + "\n".join(f"  {p}" for p in problems))


def _format_error(err: dict[str, Any]) -> str:
    """One pydantic error as ``dotted.key: message`` with the allowed values."""
    parts: list[str] = []
    for loc in err["loc"]:
        if isinstance(loc, str) and loc.startswith(("list[", "function-after[")):
            continue  # union branch names say nothing to a user
        if isinstance(loc, int):
            parts.append(f"[{loc}]")
        elif loc == "str":
            continue
        else:
            parts.append(("." if parts else "") + str(loc))
    key = "".join(parts) or "<root>"
    kind, given = err["type"], err.get("input")
    if kind == "literal_error":
        allowed = err["ctx"]["expected"].replace("'", "").replace(" or ", ", ")
        return f"{key}: {given!r} is not one of {allowed}"
    if kind == "extra_forbidden":
        return f"{key}: unknown key (check the spelling; see params.yaml for the allowed keys)"
    if kind == "missing":
        return f"{key}: required key is missing"
    msg = err["msg"].removeprefix("Value error, ")
    if kind in ("value_error", "assertion_error"):
        # A check across sections (a validator of the whole file) names its own keys.
        return msg if key == "<root>" else f"{key}: {msg}"
    return f"{key}: {msg} (got {given!r})"


def _family_counts(families: Any) -> dict[str, int]:
    """Family name -> its count, for the families whose count is valid."""
    return {name: spec["count"] for name, spec in (families.items() if isinstance(families, dict) else ())
            if isinstance(name, str) and isinstance(spec, dict) and isinstance(spec.get("count"), int)
            and not isinstance(spec["count"], bool) and 1 <= spec["count"] <= 4096}


def parse_config(data: Any, source: str = "<params>") -> Config:
    """Validate a mapping; raise ConfigError listing every problem."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(source, [f"<root>: expected a mapping of keys, got {type(data).__name__}"])
    opponents: Any = data.get("opponents", {})
    opponents = opponents if isinstance(opponents, dict) else {}
    strategies = opponents.get("kuhn_strategies", {})
    strategies = dict(strategies) if isinstance(strategies, dict) else {}
    # A family's name and its members' are opponent names (a bad count is reported by opponents.*_families).
    counts = _family_counts(opponents.get("kuhn_families", {}))
    for name, count in counts.items():
        strategies.update({name: {}, **{member_name(name, i): {} for i in range(count)}})
    ttt_counts = _family_counts(opponents.get("ttt_families", {}))
    players = {n: {} for name, count in ttt_counts.items() for n in (name, *(member_name(name, i)
                                                                           for i in range(count)))}
    context = {"kuhn_strategies": strategies, "kuhn_families": counts, "ttt_players": players,
               "ttt_families": ttt_counts}
    try:
        return Config.model_validate(data, context=context)
    except ValidationError as err:
        seen: list[str] = []
        for e in err.errors():
            str_branch = any(loc == "str" or str(loc).startswith("function-after[") for loc in e["loc"])
            list_branch = any(str(loc).startswith("list[") for loc in e["loc"])
            if str_branch and isinstance(e.get("input"), list):
                continue  # the list branch of a str-or-list union reports the real problem
            if list_branch and e["type"] == "list_type" and isinstance(e.get("input"), str):
                continue  # ... and the str branch when a name was given
            line = _format_error(e)
            if line not in seen:
                seen.append(line)
        raise ConfigError(source, seen) from None


def _set_dotted(data: dict[str, Any], key: str, value: Any) -> str | None:
    """Set ``a.b.c`` in the nested mapping ``data``; a problem, or None."""
    *parents, leaf = key.split(".")
    node = data
    for depth, part in enumerate(parents):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            return f"{'.'.join(parents[:depth + 1])} is not a section"
        node = child
    node[leaf] = value
    return None


def apply_values(data: dict[str, Any], values: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Dotted keys -> values (a run's ``set``, a profile) set into a copy of the raw
    params mapping; the result still goes through validation."""
    data = copy.deepcopy(data)
    problems = [f"{where}: {key}: {problem}" for key, value in values.items()
                if (problem := _set_dotted(data, key, value)) is not None]
    if problems:
        raise ConfigError("params", problems)
    return data


def apply_overrides(data: dict[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """``section.key=value`` items (values in YAML: ``1e-3``, ``true``, ``[a, b]``)
    set into a copy of the raw params mapping; the result still goes through
    validation, so a bad key or value is reported like one in the file."""
    import yaml

    data = copy.deepcopy(data)
    problems = []
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key or any(not part for part in key.split(".")):
            problems.append(f"--set {item!r}: expected KEY=VALUE with a dotted key, e.g. train.learning_rate=1e-3")
            continue
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError:
            problems.append(f"--set {item!r}: the value is not valid YAML")
            continue
        if (problem := _set_dotted(data, key, value)) is not None:
            problems.append(f"--set {item!r}: {problem}")
    if problems:
        raise ConfigError("command line", problems)
    return data


def run_values(cfg: Config, run: str) -> dict[str, Any]:
    """What makes params.yaml one run of ``reproduce.runs``: its environment and
    method, ``reproduce.iterations``, then the run's own ``set``."""
    if run not in cfg.reproduce.runs:
        raise ConfigError("command line", [f"--run: {run!r} is not one of reproduce.runs "
                                           f"({', '.join(cfg.reproduce.runs)})"])
    spec = cfg.reproduce.runs[run]
    return {"env.name": spec.env, "algorithm.preset": spec.method, "train.iterations": cfg.reproduce.iterations,
            **spec.set}


def run_data(data: dict[str, Any], run: str, source: str) -> dict[str, Any]:
    """The raw params ``data`` as run ``run`` of its ``reproduce.runs`` (not yet validated as such)."""
    return apply_values(data, run_values(parse_config(data, source), run), f"reproduce.runs.{run}.set")


def load_config(path: str | Path, overrides: Sequence[str] = (), run: str | None = None) -> Config:
    """Read and validate a params file, as run ``run`` of ``reproduce.runs`` if
    given, with ``--set`` overrides applied last; ConfigError (with every
    problem) otherwise."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise ConfigError(str(path), [f"<file>: no such file (pass --params PATH or run from the project root)"])
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown position"
        raise ConfigError(str(path), [f"<yaml>: not valid YAML at {where}: {getattr(err, 'problem', err)}"]) from None
    except UnicodeDecodeError as err:
        raise ConfigError(str(path), [f"<file>: not UTF-8 text ({err.reason})"]) from None
    if not (overrides or run) or (data is not None and not isinstance(data, dict)):
        return parse_config(data, str(path))  # (a bad root is reported here)
    data, source = data or {}, str(path)
    if run is not None:
        data = run_data(data, run, source)
        source += f" as run {run}"
    if overrides:
        data = apply_overrides(data, overrides)
        source += f" with --set {' '.join(overrides)}"
    return parse_config(data, source)
