"""``reproduce``, ``sweep`` and ``tracking`` of params.yaml: which runs the paper
reproduction trains (dvc.yaml), the ablation grids (``mage sweep``), and MLflow."""

from __future__ import annotations


from typing import Annotated, Any, Literal, Mapping

from pydantic import AfterValidator, Field, StringConstraints, field_validator, model_validator

from mage_core.config.grids import combos, matches
from mage_core.config.tasks import GameName
from mage_core.schema import PositiveInt, Strict


class RunConfig(Strict):
    """One training run of the reproduction: an environment, a method preset, and
    dotted-key overrides of its own (e.g. a smaller batch for a slow game)."""

    env: GameName
    method: str
    set: dict[str, Any] = {}

    @field_validator("method")
    @classmethod
    def _known(cls, v: str) -> str:
        from mage_core.config.presets import preset_values

        preset_values(v)  # raises with the valid names
        return v


RunName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9_-]+$")]
ProfileName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9_]+$")]
GridName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9_]+$")]


class ReproduceConfig(Strict):
    """The paper reproduction (dvc.yaml, `mage reproduce`): which runs, how long."""

    runs: dict[RunName, RunConfig] = {"kuhn_poker-mage": RunConfig(env="kuhn_poker", method="mage")}
    #: Grids of ``sweep.grids`` the reproduction also runs, each point a run of its graph
    #: (``mage_core.config.ablations``); empty: Table 1 and the OOD suites alone.
    ablations: list[GridName] = []
    iterations: PositiveInt = 40
    eval_per_pair: PositiveInt = 200
    max_concurrent: PositiveInt = 1
    profiles: dict[ProfileName, dict[str, Any]] = {}


def _dotted_keys(values: Mapping[str, Any]) -> Mapping[str, Any]:
    bad = [key for key in values if not key or any(not part for part in key.split("."))]
    if bad:
        raise ValueError(f"{', '.join(map(repr, bad))}: not a dotted key such as train.learning_rate")
    return values


class ClaimConfig(Strict):
    """A claim of the paper a grid tests: the setting it says does better (``better``: varied
    key -> value, the seed left out) than another (``than``), on a suite (``in_domain`` or an
    out-of-domain suite's name), by the final episode's ``measure``. The verdict rests on the paired difference per training seed."""

    text: str
    better: Annotated[dict[str, Any], AfterValidator(_dotted_keys)]
    than: Annotated[dict[str, Any], AfterValidator(_dotted_keys)]
    suite: str = "in_domain"
    #: headline: chips on Kuhn Poker, success elsewhere; draw: the draw rate (against a player that
    #: cannot be beaten, such as MCTS-1000, the paper reads draws).
    measure: Literal["headline", "success", "draw"] = "headline"


class DecompositionConfig(Strict):
    """A difference taken apart one component at a time: ``steps`` are settings of the grid
    (varied key -> value, the seed left out), each differing from the one before in one
    component; each step's difference (this setting minus the one before, on the final episode's
    headline measure, paired per training seed) and the whole (last minus first) are reported,
    the steps summing to the whole."""

    text: str
    steps: list[Annotated[dict[str, Any], AfterValidator(_dotted_keys)]] = Field(min_length=2)
    suite: str = "in_domain"


class GridConfig(Strict):
    """An ablation grid: dotted-key overrides every point shares (``set``) and the
    keys it varies (``vary``: key -> values); its points are the product of the
    ``vary`` lists less those that match an ``exclude`` entry (varied key -> value, every one
    equal), each a training run plus its evaluation (``mage sweep``). ``claims``: what
    the paper says of it, each judged from the points (``mage ablations``)."""

    set: Annotated[dict[str, Any], AfterValidator(_dotted_keys)] = {}
    vary: dict[str, list[Any]]
    exclude: list[Annotated[dict[str, Any], AfterValidator(_dotted_keys)]] = []
    claims: list[ClaimConfig] = []
    decompose: DecompositionConfig | None = None

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

    def _names_a_value(self, where: str, setting: dict[str, Any], problems: list[str]) -> None:
        for key, value in setting.items():
            if key not in self.vary:
                problems.append(f"{where}: {key} is not a varied key ({', '.join(self.vary)})")
            elif not any(repr(value) == repr(v) for v in self.vary[key]):
                problems.append(f"{where}: {key}={value!r} is not one of its values {self.vary[key]}")

    @model_validator(mode="after")
    def _claims_name_points(self) -> "GridConfig":
        problems = []
        for i, setting in enumerate(self.exclude):
            if not setting:
                problems.append(f"exclude[{i}]: name at least one varied key and its value")
            self._names_a_value(f"exclude[{i}]", setting, problems)
        for i, claim in enumerate(self.claims):
            for side in ("better", "than"):
                self._names_a_value(f"claims[{i}].{side}", getattr(claim, side), problems)
            if claim.better == claim.than:
                problems.append(f"claims[{i}]: better and than are the same setting")
        steps = self.decompose.steps if self.decompose is not None else []
        for i, step in enumerate(steps):
            self._names_a_value(f"decompose.steps[{i}]", step, problems)
            if i and step == steps[i - 1]:
                problems.append(f"decompose.steps[{i}]: the same setting as the step before")
        if not problems:  # every exclude leaves a point out, every claim's side and step keeps one
            every, kept = combos(self.vary), combos(self.vary, self.exclude)
            problems += [f"exclude[{i}]: matches no point" for i, setting in enumerate(self.exclude)
                         if not any(matches(c, setting) for c in every)]
            if not kept:
                problems.append("exclude leaves no point")
            named = [(f"claims[{i}].{side}", getattr(c, side)) for i, c in enumerate(self.claims)
                     for side in ("better", "than")] + [(f"decompose.steps[{i}]", s) for i, s in enumerate(steps)]
            problems += [f"{where}: every point it names is excluded" for where, setting in named
                         if kept and not any(matches(c, setting) for c in kept)]
        if problems:
            raise ValueError("; ".join(problems))
        return self


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


