"""The ablation grids as runs of the reproduction (``reproduce.ablations``, issue 42).

A grid of ``sweep.grids`` is dotted-key overrides every point shares (``set``) and the keys it
varies (``vary``); its points are the product of the ``vary`` lists (less those ``exclude`` names). ``mage sweep GRID`` runs
the points in workspaces of their own; ``reproduce.ablations`` names the grids the
reproduction runs in its own graph, where each point is one more run beside ``reproduce.runs``:

- its name is ``<grid>-<point>``, the point's name the slugs of the values that differ between
  the grid's points (``reward_design-ablation_cumulative-1``);
- its values are those of a ``reproduce.runs`` entry: ``env.name`` and ``algorithm.preset`` from
  the point (or the params file), ``reproduce.iterations``, then every other key of the point;
- a point whose resolved params equal a ``reproduce.runs`` run's, or an earlier grid's point, is
  that run (``reuses``): the graph trains it once, and the grid's summary reads its outputs.

Every point is resolved before any work, and ``ablation_runs`` raises one ConfigError naming
every point that names a preset or key that does not exist, every two points of one grid that
differ in nothing, and every point whose seeds meet the report set's (its selection set drawn
with ``evaluation.seed``) or leave it (another ``evaluation.seed``: not Table 1's tasks, unpaired).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from mage_core.config.grids import grid_points, point_values, run_name
from mage_core.schema import ConfigError


@dataclass(frozen=True)
class AblationRun:
    """One point of a grid the reproduction runs."""

    name: str  # <grid>-<point>: the run name of its stages
    grid: str
    point: str
    varied: dict[str, Any]  # the point's values of the grid's varied keys
    env: str
    method: str
    reuses: str | None  # the run (of reproduce.runs, or an earlier grid's) whose params it equals
    values: dict[str, Any] = field(repr=False)  # what run_values applies, env and method included
    params: dict[str, Any] = field(repr=False, default_factory=dict)  # resolved, dotted key -> value


def ablation_runs(data: Mapping[str, Any], source: str = "params.yaml") -> dict[str, AblationRun]:
    """Every point of every grid of ``reproduce.ablations`` of the raw params ``data``, in order,
    each resolved and validated as a run; ConfigError naming every bad point and every two points
    of one grid that differ in nothing."""
    from mage_core.config import apply_values, parse_config, run_values

    data = dict(data)
    cfg = parse_config(data, source)
    if not cfg.reproduce.ablations:
        return {}
    resolved: dict[str, Any] = {}  # reproduce.runs run -> its params (a dump), by (env, method)

    def table_run(name: str) -> Any:
        if name not in resolved:
            values = run_values(cfg, name)
            resolved[name] = parse_config(apply_values(data, values, f"reproduce.runs.{name}"), name).model_dump()
        return resolved[name]

    problems: list[str] = []
    out: dict[str, AblationRun] = {}
    seen: dict[str, str] = {}  # canonical params -> the first run (<grid>-<point>) that has them
    suites_checked: set[str] = set()
    for grid in cfg.reproduce.ablations:
        for point, varied, values in grid_points(cfg.sweep.grids[grid]):
            name = run_name(grid, point)
            where = f"reproduce.ablations: grid {grid}, point {point}"
            if name in cfg.reproduce.runs:
                problems.append(f"{where}: its run name {name} is also a run of reproduce.runs")
                continue
            applied = point_values(cfg, values)
            try:
                one = parse_config(apply_values(data, applied, where), where)
            except ConfigError as err:
                problems += [p if p.startswith(where) else f"{where}: {p}" for p in err.problems]
                continue
            # (its selection_seed equal to its evaluation.seed is refused by the evaluation section itself)
            if one.evaluation.seed != cfg.evaluation.seed:
                problems.append(f"{where}: evaluation.seed {one.evaluation.seed} is not the reproduction's "
                                f"({cfg.evaluation.seed}): its report set would not be Table 1's, and its "
                                "comparisons not paired")
                continue
            dump = one.model_dump()
            # what it trains, whatever its preset is called (a preset is only its algorithm values)
            trained = {**dump, "algorithm": {k: v for k, v in dump["algorithm"].items() if k != "preset"}}
            canonical = json.dumps(trained, sort_keys=True, default=str)
            first = seen.get(canonical)
            if first is not None and out[first].grid == grid:
                problems.append(f"{where}: differs in nothing from point {out[first].point} (the same params "
                                "once resolved)")
                continue
            reuses = next((run for run, spec in cfg.reproduce.runs.items()
                           if spec.env == one.env.name and spec.method == one.algorithm.preset
                           and table_run(run) == dump), None)
            if reuses is None and first is not None:  # the same run in an earlier grid: trained once
                reuses = out[first].reuses or first
            seen.setdefault(canonical, name)
            out[name] = AblationRun(name, grid, point, varied, one.env.name, one.algorithm.preset, reuses, applied,
                                    _flat(one.model_dump(mode="json")))
            if grid not in suites_checked:  # a claim's suite is one the grid's evaluations play (its first point's)
                suites_checked.add(grid)
                spec = cfg.sweep.grids[grid]
                suites = {"in_domain", *(getattr(one.evaluation.ood, one.env.name, None) or {})}
                named = [(f"claims[{i}]", c.suite) for i, c in enumerate(spec.claims)]
                named += [("decompose", spec.decompose.suite)] if spec.decompose is not None else []
                problems += [f"reproduce.ablations: grid {grid}: {what}.suite {suite!r} is not a suite its "
                             f"evaluation plays ({', '.join(sorted(suites))})" for what, suite in named
                             if suite not in suites]
    if problems:
        raise ConfigError(source, problems)
    return out


def _flat(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, Mapping) and value:
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def changes(before: Mapping[str, Any], after: Mapping[str, Any],
            ignore: Sequence[str] = ("algorithm.preset", "seed")) -> list[str]:
    """What differs between two resolved params (``AblationRun.params``): ``key: old -> new``, sorted,
    the preset's name and the seed left out (a preset is only the values it fills in)."""
    keys = sorted((set(before) | set(after)) - set(ignore))
    return [f"{key}: {before.get(key)} -> {after.get(key)}" for key in keys if before.get(key) != after.get(key)]
