"""Every run's evaluation and training outputs read into three tidy tables (``RunTables``).

Per run, what ``mage evaluate`` wrote (``metrics.json``, ``trials.parquet``) and
what ``mage train`` wrote (``metrics.jsonl``, ``summary.json``), checked as read
(a missing or malformed file is a ValueError naming it):

- ``episodes``: one row per (run, suite, group, episode index k): success, draw,
  mean score (Kuhn: chips, docs/method.md section 8's primary Kuhn metric), for
  Kuhn against deterministic opponents the greedy policy's exact chips
  (``score_exact``: every opponent, seat and deal enumerated, no interval) and
  Pass@k, each with its 95% interval as ``mage evaluate`` computed it; the
  group-level Kuhn figures (best-response value, the opponent-known ceiling,
  exploitation ratio, the suite's ceilings) repeated on every k so that one table
  answers every per-opponent question;
- ``curves``: one row per (run, training step): the train headline (final
  episode of the training rollouts), the eval headline where training evaluated,
  and the policy entropy (whose collapse is the known failure of fresh-deal Kuhn);
- ``overview``: one row per run: K, the policy evaluated, the protocol of its
  evaluation (restart, early stop: what the Kuhn ceilings depend on), the
  training population and the training summary.

Metrics are re-read, never recomputed; the tables built from them are
``mage_core.evaluation.aggregate``'s. pandas is imported at module top because
only stages import this module, and ``mage --help`` imports no stage.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, Mapping, NamedTuple

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from mage_core.envs.registry import task
from mage_core.evaluation.trials import TRIAL_COLUMNS

EPISODE_COLUMNS = ("run", "env", "method", "suite", "group", "opponent", "seat", "unit", "episode",
                   "num_meta_episodes", "success", "success_low", "success_high", "draw", "draw_low", "draw_high",
                   "score", "score_low", "score_high", "score_exact", "pass_at", "pass_at_low", "pass_at_high",
                   "best_response_value", "exploitation_ratio", "ceiling_best_fixed", "ceiling_passive",
                   "ceiling_adaptive", "ceiling_known", "opening_bet_J_ep1", "opening_bet_Q_ep1", "opening_bet_K_ep1",
                   "success_gain", "success_gain_low", "success_gain_high")
CURVE_COLUMNS = ("run", "env", "method", "step", "train_headline", "eval_headline", "entropy")
OVERVIEW_COLUMNS = ("run", "env", "method", "episodes_per_meta_episode", "policy", "population", "restart",
                    "early_stop", "iterations", "best_score", "best_iteration", "select_on")
#: What ``metrics.json``'s ``protocol`` holds: how the evaluation's meta-episodes were played.
PROTOCOL_KEYS = ("restart", "early_stop")
#: What a training summary must hold; wall-clock time is not among them (it goes to MLflow only,
#: so that summary.json, a DVC-cached output, is the same bytes on every run).
SUMMARY_KEYS = ("iterations", "best_score", "best_iteration")

_PER_EPISODE = re.compile(r"^(success|draw|chips_exact|chips|reward)_ep(\d+)(_low|_high)?$")
#: Metric name -> episode column (``chips_exact``: the greedy policy's exact Kuhn value, no interval).
_EPISODE_COLUMN = {"success": "success", "draw": "draw", "chips": "score", "reward": "score",
                   "chips_exact": "score_exact"}
_PASS_AT = re.compile(r"^pass_at_(\d+)(_low|_high)?$")
#: Per group, not per episode index; Kuhn's exact ceilings are the ``all`` group's (``envs.kuhn_poker.ceilings``).
_GROUP_SCALARS = ("num_meta_episodes", "best_response_value", "exploitation_ratio", "ceiling_best_fixed",
                  "ceiling_passive", "ceiling_adaptive", "ceiling_known", "opening_bet_J_ep1", "opening_bet_Q_ep1",
                  "opening_bet_K_ep1", "success_gain", "success_gain_low", "success_gain_high")


class RunTables(NamedTuple):
    episodes: pd.DataFrame
    curves: pd.DataFrame
    overview: pd.DataFrame


def unit_of(env: str) -> str:
    """Kuhn is read in chips: win rate does not show exploitation (docs/method.md section 8)."""
    return task(env).score_unit


def load_runs(eval_root: Path, train_root: Path | None, runs: Mapping[str, tuple[str, str]]) -> RunTables:
    """Read every run's outputs; ``runs`` maps a run name (its folder under
    ``eval_root`` and ``train_root``) to its (env, method).

    Every run must have an evaluation folder. A training folder is optional
    (prompting-only baselines have none), but one that exists must be complete.
    Raises ValueError naming the file that is missing or malformed."""
    episodes: list[dict[str, Any]] = []
    curves: list[dict[str, Any]] = []
    overview: list[dict[str, Any]] = []
    for run, (env, method) in runs.items():
        ident = {"run": run, "env": env, "method": method}
        info = _read_eval(eval_root / run, env)
        episodes += [{**ident, **row} for row in _episode_rows(info["metrics"], unit_of(env))]
        row = {**ident, "episodes_per_meta_episode": info["episodes_per_meta_episode"], "policy": info["policy"],
               **{key: info["protocol"][key] for key in PROTOCOL_KEYS}}
        train_dir = train_root / run if train_root is not None else None
        if train_dir is not None and train_dir.is_dir():
            params, records = read_jsonl(train_dir / "metrics.jsonl")
            summary = _read_json(train_dir / "summary.json", (*SUMMARY_KEYS, "selection_set"))
            curves += [{**ident, **c} for c in _curve_rows(records, env)]
            row.update({key: summary[key] for key in SUMMARY_KEYS})
            selection = summary["selection_set"]
            if not isinstance(selection, dict) or "select_on" not in selection:
                raise ValueError(f"{train_dir / 'summary.json'}: malformed, 'selection_set' must hold 'select_on'")
            row["select_on"] = selection["select_on"]
            population = params.get(f"population.{env}")
            row["population"] = population if isinstance(population, str) else "custom"
        overview.append(row)
    return RunTables(pd.DataFrame(episodes, columns=list(EPISODE_COLUMNS)),
                     pd.DataFrame(curves, columns=list(CURVE_COLUMNS)),
                     pd.DataFrame(overview, columns=list(OVERVIEW_COLUMNS)))


def _read_json(path: Path, required: tuple[str, ...]) -> dict[str, Any]:
    if not path.is_file():
        raise ValueError(f"{path}: file missing")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: not valid JSON ({err})") from err
    absent = [key for key in required if not isinstance(data, dict) or key not in data]
    if absent:
        raise ValueError(f"{path}: malformed, missing key(s) {', '.join(absent)}")
    return data


def _read_eval(folder: Path, env: str) -> dict[str, Any]:
    """``metrics.json`` checked against the run's env; ``trials.parquet`` checked
    for its columns and suites, so stale or foreign files are caught here."""
    path = folder / "metrics.json"
    data = _read_json(path, ("game", "episodes_per_meta_episode", "policy", "protocol", "metrics"))
    protocol = data["protocol"]
    if not (isinstance(protocol, dict) and set(protocol) == set(PROTOCOL_KEYS)
            and protocol["restart"] in ("same", "fresh") and isinstance(protocol["early_stop"], bool)):
        raise ValueError(f"{path}: malformed, 'protocol' must hold restart (same/fresh) and early_stop (true/false)")
    metrics = data["metrics"]
    if not isinstance(metrics, dict) or not all(
            isinstance(v, (int, float)) and k.startswith("eval/") and k.count("/") >= 3 for k, v in metrics.items()):
        raise ValueError(f"{path}: malformed, 'metrics' must map eval/<suite>/<group>/<name> keys to numbers")
    if data["game"] != env:
        raise ValueError(f"{path}: evaluates {data['game']!r} but the run is listed under env {env!r}")
    trials = folder / "trials.parquet"
    if not trials.is_file():
        raise ValueError(f"{trials}: file missing")
    try:
        columns = list(pq.read_schema(trials).names)
        if tuple(columns) != TRIAL_COLUMNS:
            raise ValueError(f"{trials}: columns {columns} are not the trial table's {list(TRIAL_COLUMNS)}")
        frame = pd.read_parquet(trials, columns=["suite"])
    except (OSError, pa.ArrowException) as err:
        raise ValueError(f"{trials}: not a readable parquet file ({err})") from err
    suites = {key.split("/")[1] for key in metrics}
    if set(frame["suite"]) != suites:
        raise ValueError(f"{trials}: suites {sorted(set(frame['suite']))} differ from {path}'s {sorted(suites)}")
    return data


def _episode_rows(metrics: Mapping[str, float], unit: str) -> list[dict[str, Any]]:
    """``eval/<suite>/<group>/<name>`` keys -> one row per (suite, group, k)."""
    cells: dict[tuple[str, str], dict[int, dict[str, float]]] = {}
    scalars: dict[tuple[str, str], dict[str, float]] = {}
    for key, value in metrics.items():
        parts = key.split("/")
        where, name = (parts[1], "/".join(parts[2:-1])), parts[-1]
        if (m := _PER_EPISODE.match(name)) is not None:
            column = _EPISODE_COLUMN[m[1]]
            cells.setdefault(where, {}).setdefault(int(m[2]), {})[column + (m[3] or "")] = float(value)
        elif (m := _PASS_AT.match(name)) is not None:
            cells.setdefault(where, {}).setdefault(int(m[1]), {})["pass_at" + (m[2] or "")] = float(value)
        elif name in _GROUP_SCALARS:
            scalars.setdefault(where, {})[name] = float(value)
    rows = []
    for (suite, group), by_k in sorted(cells.items()):
        opponent, _, seat = group.partition("/")
        for k, values in sorted(by_k.items()):
            rows.append({"suite": suite, "group": group, "opponent": opponent, "seat": seat or group, "unit": unit,
                         "episode": k, **scalars.get((suite, group), {}), **values})
    return rows


def read_jsonl(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The params record and the step records of a training log."""
    if not path.is_file():
        raise ValueError(f"{path}: file missing")
    params: dict[str, Any] = {}
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}: line {number} is not valid JSON ({err})") from err
        if not isinstance(record, dict) or ("params" not in record and "step" not in record):
            raise ValueError(f"{path}: line {number} is neither a params nor a step record")
        if "params" in record:
            params = record["params"]
        else:
            records.append(record)
    return params, records


def _last_episode_value(record: Mapping[str, Any], prefix: str) -> float:
    """The value of the highest episode index ``k`` among ``<prefix>{k}`` keys
    (single-episode baselines train with K=1, meta-RL with K=3)."""
    ks = [int(key[len(prefix):]) for key in record if key.startswith(prefix) and key[len(prefix):].isdigit()]
    value = record[f"{prefix}{max(ks)}"] if ks else None
    return math.nan if value is None else float(value)  # the logger writes NaN as null


def _curve_rows(records: list[dict[str, Any]], env: str) -> list[dict[str, Any]]:
    """One row per step; an iteration's records are merged (``final/`` keys,
    the post-training evaluation, are in summary.json and left out here)."""
    headline = task(env).headline
    steps: dict[int, dict[str, Any]] = {}
    for record in records:
        steps.setdefault(int(record["step"]), {}).update(
            {k: v for k, v in record.items() if not k.startswith("final/")})
    rows = []
    for step, record in sorted(steps.items()):
        entropy = record.get("train/ppo/entropy")
        rows.append({"step": step,
                     "train_headline": _last_episode_value(record, f"train/rollout/all/{headline}_ep"),
                     "eval_headline": _last_episode_value(record, f"eval/all/{headline}_ep"),
                     "entropy": math.nan if entropy is None else float(entropy)})
    return rows
