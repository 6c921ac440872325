"""The schema of ``params.yaml`` and its loader.

Validate at the edge, then trust the types (docs/architecture.md, style rule 3): loading
reports ALL problems at once, each with its dotted key and what is allowed,
and the CLI exits with status 2 before anything is written. Unknown keys are
errors, so a typo never silently falls back to a default.

The sections live in this package's modules: ``tasks`` (``env`` and ``data``, assembled
from each task's own schema), ``training`` (model, policy, rollout, algorithm, train,
backend, evaluation), ``presets`` (the method presets an ``algorithm.preset`` names),
``populations`` (opponents, populations, out-of-domain suites, tournaments) and
``pipeline`` (reproduce, sweep, tracking). Here: the whole file (``Config``) with the
rules across its sections, and the loader.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Annotated, Any, Mapping, Sequence

from pydantic import Field, ValidationError, model_validator

from mage_core.config.pipeline import (
    GridConfig,
    ReproduceConfig,
    RunConfig,
    SweepConfig,
    TrackingConfig,
)
from mage_core.config.populations import (
    MatchConfig,
    OodSuitesConfig,
    OpponentsConfig,
    PopulationConfig,
    TournamentConfig,
)
from mage_core.config.presets import PRESET_POPULATIONS
from mage_core.config.tasks import DataConfig, EnvConfig, GameName, TwoPlayerGame
from mage_core.config.training import (
    AlgorithmConfig,
    BackendConfig,
    EvaluationConfig,
    ModelConfig,
    PolicyConfig,
    RolloutConfig,
    TrainConfig,
    WarmStartConfig,
)
from mage_core.envs.params import PARAMS_FILE
from mage_core.envs.registry import GAMES, games_with, task
from mage_core.opponents.families import member_name
from mage_core.schema import ConfigError, Strict

#: What other modules import from here besides ``Config`` and the loader.
__all__ = [
    "AlgorithmConfig", "BackendConfig", "Config", "ConfigError", "DataConfig", "EnvConfig", "EvaluationConfig",
    "GameName", "GridConfig", "MatchConfig", "ModelConfig", "PolicyConfig", "ReproduceConfig", "RolloutConfig",
    "RunConfig", "TrainConfig", "TwoPlayerGame", "WarmStartConfig", "apply_overrides", "apply_values", "load_config",
    "parse_config", "run_data", "run_values",
]


class EvaluationSection(EvaluationConfig):
    """The fixed evaluation sets: in-domain (the training population) and out-of-domain."""

    ood: OodSuitesConfig = OodSuitesConfig()


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
    warm_start: WarmStartConfig = WarmStartConfig()
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
    def _ood_suites_fit_the_env(self) -> "Config":
        """A single-agent suite changes one env setting (``Task.ood_param``): the env's settings
        with that value must pass their own rules (MineSweeper: mines that fit the board), as
        ``EnvSettings.replace`` checks them when the suite is played."""
        problems = []
        for game in GAMES:
            param, settings = task(game).ood_param, getattr(self.env, game)
            if param is None:
                continue
            for name, suite in getattr(self.evaluation.ood, game).items():
                try:
                    settings.replace(**{param: getattr(suite, param)})
                except ValidationError as err:
                    problems += [_format_error({**e, "loc": ("evaluation", "ood", game, name, *e["loc"])})
                                 for e in err.errors()]
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @model_validator(mode="after")
    def _ablations_name_grids(self) -> "Config":
        unknown = [name for name in self.reproduce.ablations if name not in self.sweep.grids]
        if unknown:
            raise ValueError(f"reproduce.ablations: {', '.join(unknown)} not a grid of sweep.grids "
                             f"({', '.join(self.sweep.grids) or 'none defined'})")
        if len(set(self.reproduce.ablations)) != len(self.reproduce.ablations):
            raise ValueError(f"reproduce.ablations: a grid is listed twice ({self.reproduce.ablations})")
        return self

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

    @model_validator(mode="after")
    def _openai_answers_in_free_text(self) -> "Config":
        if self.backend.generator == "openai" and self.policy.action_mode != "free":
            raise ValueError("backend.generator: openai answers in free text only (the completions route scores "
                             "no candidates); set policy.action_mode: free")
        return self

    def init_model(self) -> str | None:
        """The warm start this run starts from: ``model.init``, else the ``warm_start``
        output of its task when ``warm_start.tasks`` lists it (the embedded model only)."""
        if self.model.init is not None or self.model.source != "embedded":
            return self.model.init
        ws = self.warm_start
        return f"{ws.output_dir}/{self.env.name}/model" if self.env.name in ws.tasks else None

    def vllm_engine(self) -> dict[str, Any]:
        """The arguments of every vLLM engine of a run (``VLLMGenerator``), in the stage's
        process or on a Ray rollout actor: bf16 training samples from bf16 weights, a
        local model keeps its own dtype, the embedded tiny model runs in float32."""
        b, m = self.backend, self.model
        dtype = "bfloat16" if b.precision == "bf16" else m.dtype if m.source == "local" else "float32"
        return {"dtype": dtype, "seed": self.seed, "gpu_memory_utilization": b.gpu_memory_utilization,
                "enable_sleep_mode": b.vllm_sleep}


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
    context = {PARAMS_FILE: True, "kuhn_strategies": strategies, "kuhn_families": counts, "ttt_players": players,
               "ttt_families": ttt_counts}
    for key in ("kuhn_populations", "ttt_populations"):  # a name that stands for its entries
        named = opponents.get(key, {})
        context[key] = ({name: entries for name, entries in named.items() if isinstance(entries, list)}
                        if isinstance(named, dict) else {})
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
    method, ``reproduce.iterations``, then the run's own ``set``; or one point of a grid of
    ``reproduce.ablations``, named ``<grid>-<point>`` (``mage_core.config.ablations``)."""
    if run not in cfg.reproduce.runs:
        from mage_core.config.grids import find

        values = find(cfg, run)
        if values is not None:
            return values
        grids = f"; or a point of the grids of reproduce.ablations ({', '.join(cfg.reproduce.ablations)})" \
            if cfg.reproduce.ablations else ""
        raise ConfigError("command line", [f"--run: {run!r} is not one of reproduce.runs "
                                           f"({', '.join(cfg.reproduce.runs)}){grids}"])
    spec = cfg.reproduce.runs[run]
    return {"env.name": spec.env, "algorithm.preset": spec.method, "train.iterations": cfg.reproduce.iterations,
            **spec.set}


def run_data(data: dict[str, Any], run: str, source: str) -> dict[str, Any]:
    """The raw params ``data`` as run ``run`` of its ``reproduce.runs`` (not yet validated as such)."""
    return apply_values(data, run_values(parse_config(data, source), run), f"reproduce.runs.{run}.set")


def warm_start_data(data: dict[str, Any], name: str, source: str) -> dict[str, Any]:
    """The raw params ``data`` as the warm start of task ``name`` (its ``warm_start.tasks``
    entry: ``env.name``, then the keys the entry sets), not yet validated as such."""
    tasks = parse_config(data, source).warm_start.tasks
    if name not in tasks:
        raise ConfigError("command line", [f"--task: {name!r} is not one of warm_start.tasks "
                                           f"({', '.join(tasks) or 'none listed'})"])
    return apply_values(data, {"env.name": name, **tasks[name]}, f"warm_start.tasks.{name}")


def load_config(path: str | Path, overrides: Sequence[str] = (), run: str | None = None,
                warm_start: str | None = None) -> Config:
    """Read and validate a params file, as run ``run`` of ``reproduce.runs`` or as the
    warm start of task ``warm_start`` (``warm_start.tasks``) if given, with ``--set``
    overrides applied last; ConfigError (with every problem) otherwise."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise ConfigError(str(path), ["<file>: no such file (pass --params PATH or run from the project root)"])
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown position"
        raise ConfigError(str(path), [f"<yaml>: not valid YAML at {where}: {getattr(err, 'problem', err)}"]) from None
    except UnicodeDecodeError as err:
        raise ConfigError(str(path), [f"<file>: not UTF-8 text ({err.reason})"]) from None
    if not (overrides or run or warm_start) or (data is not None and not isinstance(data, dict)):
        return parse_config(data, str(path))  # (a bad root is reported here)
    data, source = data or {}, str(path)
    if run is not None and warm_start is not None:
        raise ConfigError("command line", ["--run and --task: one or the other (a run of reproduce.runs, or the "
                                           "warm start of a task of warm_start.tasks)"])
    if run is not None:
        data = run_data(data, run, source)
        source += f" as run {run}"
    if warm_start is not None:
        data = warm_start_data(data, warm_start, source)
        source += f" as the warm start of {warm_start}"
    if overrides:
        data = apply_overrides(data, overrides)
        source += f" with --set {' '.join(overrides)}"
    return parse_config(data, source)
