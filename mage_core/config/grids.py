"""A grid of ``sweep.grids`` as points, and a point of a grid of ``reproduce.ablations`` as a run
name and its values: what ``mage sweep``, the reproduction's graph and the config loader share
(``mage_core.config.ablations`` resolves and validates the points; this module imports no
config, so that the loader can use it).
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any, Mapping, Sequence

#: Keys a point's run names itself (a ``reproduce.runs`` entry's ``env`` and ``method``).
RUN_KEYS = {"env.name": "env", "algorithm.preset": "method"}


def slug(value: Any) -> str:
    """A value as a run-name part: lower case, ``-`` as ``m``, anything else as ``_``."""
    text = (value if isinstance(value, str) else json.dumps(value)).lower().replace("-", "m")
    return re.sub(r"[^a-z0-9_]+", "_", text).strip("_") or "x"


def point_names(combos: Sequence[Mapping[str, Any]]) -> list[str]:
    """Readable, unique names: the slugs of the values that differ between points
    (``ablation_cumulative``, ``0_001-16``), numbered where two slugs collide."""
    if not combos:
        return []
    varying = [key for key in combos[0] if len({repr(c[key]) for c in combos}) > 1]
    names = ["-".join(slug(c[key]) for key in varying) or "point" for c in combos]
    if len(set(names)) < len(names):
        names = [f"p{i}-{name}" for i, name in enumerate(names)]
    return names


def matches(values: Mapping[str, Any], setting: Mapping[str, Any]) -> bool:
    """Whether ``values`` (a point's varied values) hold every key -> value of ``setting`` (an
    ``exclude`` entry, a claim's side, a decomposition step); values compare by ``repr``."""
    return all(key in values and repr(values[key]) == repr(value) for key, value in setting.items())


def combos(vary: Mapping[str, Sequence[Any]], exclude: Sequence[Mapping[str, Any]] = ()) -> list[dict[str, Any]]:
    """The product of the ``vary`` lists, in order, less the combinations an ``exclude`` entry matches."""
    product = [dict(zip(vary, chosen)) for chosen in itertools.product(*vary.values())]
    return [c for c in product if not any(matches(c, setting) for setting in exclude)]


def grid_points(grid: Any) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """``(point name, varied values, every value: the grid's set, then the varied)`` of each point
    of ``grid`` (a ``GridConfig``), in the product's order, less the points its ``exclude`` names."""
    kept = combos(grid.vary, grid.exclude)
    return [(name, combo, {**grid.set, **combo}) for name, combo in zip(point_names(kept), kept)]


def run_name(grid: str, point: str) -> str:
    return f"{grid}-{point}"


def point_values(cfg: Any, values: Mapping[str, Any]) -> dict[str, Any]:
    """What makes params one point's run (``values``: the grid's set and the point's), as
    ``run_values`` does for a ``reproduce.runs`` entry: its env and method (the point's, else the
    file's), ``reproduce.iterations``, then the rest."""
    env = values.get("env.name", cfg.env.name)
    method = values.get("algorithm.preset", cfg.algorithm.preset)
    rest = {k: v for k, v in values.items() if k not in RUN_KEYS}
    return {"env.name": env, "algorithm.preset": method, "train.iterations": cfg.reproduce.iterations, **rest}


def find(cfg: Any, run: str) -> dict[str, Any] | None:
    """``run_values`` of ablation run ``run`` of ``cfg`` (None: no grid of ``reproduce.ablations``
    has that point). Cheap: no point is validated here."""
    found = point_of(cfg, run)
    return point_values(cfg, found[2]) if found is not None else None


def point_of(cfg: Any, run: str | None) -> tuple[str, dict[str, Any], dict[str, Any]] | None:
    """``(grid, varied values, every value)`` of ablation run ``run`` of ``cfg``; None for any
    other name."""
    for grid in cfg.reproduce.ablations if run else ():
        for point, varied, values in grid_points(cfg.sweep.grids[grid]):
            if run_name(grid, point) == run:
                return grid, varied, values
    return None


def setting_label(varied: Mapping[str, Any], seed_key: str = "seed") -> str:
    """A point's varied values but the seed, as one label (``algorithm.preset=mage``): what its
    seeds share, by which the MLflow views and the summaries group them."""
    return ", ".join(f"{key}={value}" for key, value in varied.items() if key != seed_key) or "-"
