"""Saved views of the MLflow UI: Table 1 of one environment, grouped by method, in one click.

MLflow 3.17's experiment page keeps *saved views* (its "Views" menu on the Runs tab) on the
server, as experiment tags ``mlflow.sharedViewState.<id>`` whose value is an envelope
``{"name", "createdAt", "updatedAt", "state"}``; ``state`` is the page's JSON state (search
filter, columns, grouping, chart cards and sections), plain or ``deflate;<base64 zlib>``. The
UI opens one at ``#/experiments/<id>/runs?viewStateShareKey=<view id>`` (read from its bundle,
mlflow/server/js/build: the saved-views envelope, ``Ia`` / ``getExperimentPageTabRoute``;
the state's keys and chart card fields are those of its ``RunsChartsCardConfig`` classes).

``ensure_table1_views`` writes, for an environment, the view "Table 1: <env> by method": the
evaluate runs of that environment (``tags.env``, ``tags.stage``), grouped by the ``method`` tag,
with the K-independent Table 1 metrics (``mage_core.evaluation.comparison``) as columns and bar
charts, a parallel-coordinates chart over them and the adaptation curves (success, chips or
reward by episode index, the metric's step); and "Table 1: every environment", grouped by
environment then method. A view is written when missing or when the one stored was written
by this module (its envelope carries ``mage_view``) with other contents; a view a person
overwrote in the UI (the UI writes the envelope without ``mage_view``) is left alone.

Only ``mage_core.tracking`` talks to MLflow; this module builds plain dicts and calls the
client it is given.
"""

from __future__ import annotations

import base64
import json
import time
import zlib
from typing import Any, Iterable, Mapping

from mage_core.evaluation.comparison import ADAPTATION, TABLE1, TABLE1_SUITE, scored_units, table1_names

VIEW_TAG_PREFIX = "mlflow.sharedViewState."
VIEW_URL_KEY = "viewStateShareKey"
#: Bumped when the views' contents change, so views written by an older version are rewritten.
VIEW_VERSION = 1
MAX_TAG_CHARS = 20000  # MLflow's limit on an experiment tag's value (mlflow.utils.validation)
ALL_ENVS = "all"


def view_id(env: str | None) -> str:
    return f"mage-table1-{env or ALL_ENVS}"


def _chart(uuid: str, kind: str, section: str, display_name: str, **fields: Any) -> dict[str, Any]:
    """A chart card as the UI serializes one (``RunsChartsCardConfig`` and its subclasses)."""
    return {"uuid": uuid, "type": kind, "runsCountToCompare": 20, "metricSectionId": section, "deleted": False,
            "isGenerated": False, "displayName": display_name, **fields}


def _line(uuid: str, section: str, display_name: str, keys: list[str]) -> dict[str, Any]:
    return _chart(uuid, "LINE", section, display_name, metricKey=keys[0], selectedMetricKeys=keys,
                  lineSmoothness=0, xAxisScaleType="linear", scaleType="linear", range={}, xAxisKey="step",
                  selectedXAxisMetricKey="", yAxisKey="metric", yAxisExpressions=[], ignoreOutliers=False,
                  useGlobalXaxisKey=False, useGlobalLineSmoothing=False, displayPoints=True)


#: What each Table 1 key reads as on a chart.
LABELS = {"success_final": "success, final episode", "pass_at_k": "Pass@K", "chips_final": "chips, final hand",
          "chips_exact_final": "chips, final hand (greedy, exact)"}


def table1_view_state(env: str | None) -> dict[str, Any]:
    """The page state of the Table 1 view of ``env`` (None: every environment)."""
    names = table1_names(env)
    keys = [f"{TABLE1}/{TABLE1_SUITE}/{name}" for name in names]
    units = ["success", *scored_units(env)]
    table_section, curve_section, more_section = "mage-table1", "mage-adaptation", "mage-table1-more"
    charts = [_chart(f"mage-bar-{name}", "BAR", table_section, f"Table 1: {LABELS[name]}", metricKey=key)
              for name, key in zip(names, keys)]
    charts.append(_chart("mage-parallel", "PARALLEL", table_section, "Table 1, every measure",
                         selectedParams=[], selectedMetrics=keys, showAllRuns=True))
    charts += [_line(f"mage-adaptation-{unit}", curve_section, f"{unit} by episode index (in-domain)",
                     [f"{ADAPTATION}/{TABLE1_SUITE}/{unit}"]) for unit in units]
    sections = [
        {"uuid": table_section, "name": "Table 1 (in-domain suite, final episode)", "display": True,
         "isReordered": True, "deleted": False, "isGenerated": False},
        {"uuid": curve_section, "name": "Adaptation: the in-domain suite by episode index (step)", "display": True,
         "isReordered": True, "deleted": False, "isGenerated": False},
        # Where the UI files the remaining table1/in_domain/* keys (intervals, K): collapsed.
        {"uuid": more_section, "name": f"{TABLE1}/{TABLE1_SUITE}", "display": False, "isReordered": False,
         "deleted": False, "isGenerated": True},
    ]
    tag_columns = ["env", "method", "seed"] if env is None else ["method", "seed"]
    metric_columns = [f"metrics.`{key}`" for key in keys] + [f"metrics.`{TABLE1}/{TABLE1_SUITE}/k`"]
    columns = [f"tags.`{tag}`" for tag in tag_columns] + metric_columns + ["tags.`mage.model_uri`"]
    # The grid's column ids; widths apply to the columns of columnOrder only. Metrics, then
    # tags: each group of columns stays under one header.
    order = (["attributes.`Run Name`", "runDateAndNestInfo", "duration"] + metric_columns
             + [c for c in columns if c.startswith("tags.")])
    group_keys = ([{"mode": "tag", "groupByData": "env"}] if env is None else []) + [
        {"mode": "tag", "groupByData": "method"}]
    search = "tags.stage = 'evaluate'" + (f" AND tags.env = '{env}'" if env else "")
    return {
        "searchFilter": search,
        "selectedColumns": columns,
        "columnOrder": order,
        "columnWidths": {"attributes.`Run Name`": 300, "tags.`mage.model_uri`": 240,
                         **{column: 215 for column in metric_columns}},
        "groupBy": {"aggregateFunction": "average", "groupByKeys": group_keys},
        "groupsExpanded": {},
        "useGroupedValuesInCharts": True,
        "runsHiddenMode": "SHOW_ALL",
        "compareRunCharts": charts,
        "compareRunSections": sections,
        "isAccordionReordered": True,
        "hideEmptyCharts": True,
        "viewMaximized": False,
        "runListHidden": False,
    }


def ablation_view_id(grid: str) -> str:
    return f"mage-ablation-{grid}"


def ablation_view_name(grid: str) -> str:
    return f"Ablation {grid}: by setting"


def ablation_tag(grid: str) -> str:
    """The tag ``mage ablations`` puts on the evaluate run of every point of ``grid`` (a Table 1
    run a point reuses included): the point's setting, its varied values but the seed."""
    return f"ablation.{grid}"


def ablation_view_state(grid: str, env: str) -> dict[str, Any]:
    """The page state of the view of ablation grid ``grid`` (its points play ``env``): the evaluate
    runs tagged ``ablation.<grid>``, grouped by that tag (a setting's seeds averaged), with Table
    1's columns and charts."""
    state = table1_view_state(env)
    tag = ablation_tag(grid)
    state["searchFilter"] = f"tags.stage = 'evaluate' AND tags.`{tag}` LIKE '%'"
    state["groupBy"] = {"aggregateFunction": "average", "groupByKeys": [{"mode": "tag", "groupByData": tag}]}
    setting = f"tags.`{tag}`"
    state["selectedColumns"] = [setting, *state["selectedColumns"]]
    state["columnOrder"] = [c for c in state["columnOrder"] if not c.startswith("tags.")] + [
        setting, *(c for c in state["columnOrder"] if c.startswith("tags."))]
    return state


def _ensure(client: Any, experiment_id: str, tags: Mapping[str, str], vid: str, name: str,
            state: Mapping[str, Any]) -> bool:
    """Write view ``vid`` where missing or stale and this module's (module docstring); True if written."""
    stored = read_envelope(tags.get(VIEW_TAG_PREFIX + vid, ""))
    if stored is not None:
        if "mage_view" not in stored:
            return False  # changed in the UI by a person: theirs now
        try:
            same = read_state(stored) == state and stored["name"] == name
        except (KeyError, ValueError, zlib.error):
            same = False
        if same and stored["mage_view"] == VIEW_VERSION:
            return False
    now = int(time.time() * 1000)
    created = int(stored["createdAt"]) if stored and isinstance(stored.get("createdAt"), int) else now
    client.set_experiment_tag(experiment_id, VIEW_TAG_PREFIX + vid, envelope(name, state, created, now))
    return True


def ensure_ablation_view(client: Any, experiment_id: str, grid: str, env: str) -> bool:
    """Write the view of ablation grid ``grid`` where missing or stale; True if written."""
    tags = client.get_experiment(experiment_id).tags
    return _ensure(client, experiment_id, tags, ablation_view_id(grid), ablation_view_name(grid),
                   ablation_view_state(grid, env))


def view_name(env: str | None, label: str | None = None) -> str:
    return f"Table 1: {label or env} by method" if env else "Table 1: every environment by method"


def envelope(name: str, state: Mapping[str, Any], created_ms: int, updated_ms: int) -> str:
    """The experiment tag's value (the UI's ``Ho``/``lB`` format), marked as this module's."""
    text = json.dumps(state, separators=(",", ":"), sort_keys=True)
    value = json.dumps({"name": name, "createdAt": created_ms, "updatedAt": updated_ms, "state": text,
                        "mage_view": VIEW_VERSION}, separators=(",", ":"))
    if len(value) <= MAX_TAG_CHARS:
        return value
    packed = "deflate;" + base64.b64encode(zlib.compress(text.encode())).decode()  # the UI inflates with pako
    return json.dumps({"name": name, "createdAt": created_ms, "updatedAt": updated_ms, "state": packed,
                       "mage_view": VIEW_VERSION}, separators=(",", ":"))


def read_envelope(value: str) -> dict[str, Any] | None:
    try:
        data = json.loads(value)
    except (TypeError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("name"), str) else None


def read_state(data: Mapping[str, Any]) -> dict[str, Any]:
    """The state of an envelope, plain or deflated."""
    text = str(data["state"])
    if text.startswith("deflate;"):
        text = zlib.decompress(base64.b64decode(text.removeprefix("deflate;"))).decode()
    return json.loads(text)


def ensure_table1_views(client: Any, experiment_id: str, envs: Iterable[str],
                        labels: Mapping[str, str] | None = None) -> list[str]:
    """Write the Table 1 views of ``envs`` and of every environment where missing or stale
    (module docstring); the ids of the views written."""
    tags = client.get_experiment(experiment_id).tags
    written = []
    for env in [None, *sorted(set(envs))]:
        vid = view_id(env)
        if _ensure(client, experiment_id, tags, vid, view_name(env, (labels or {}).get(env or "")),
                   table1_view_state(env)):
            written.append(vid)
    return written


def saved_views(experiment_tags: Mapping[str, str]) -> list[tuple[str, str]]:
    """(view id, name) of every saved view of an experiment, this module's first."""
    views = []
    for key, value in experiment_tags.items():
        data = read_envelope(value) if key.startswith(VIEW_TAG_PREFIX) else None
        if data is not None:
            views.append((key.removeprefix(VIEW_TAG_PREFIX), data["name"]))
    return sorted(views, key=lambda v: (not v[0].startswith("mage-table1-"), not v[0].startswith("mage-ablation-"),
                                        v[0] != view_id(None), v[1]))


def view_url(base: str, experiment_id: str, vid: str, charts: bool = False) -> str:
    """The UI address that opens view ``vid`` (``base``: ``http://host:port``), in the chart
    view with ``charts``."""
    mode = "&compareRunsMode=CHART" if charts else ""
    return (f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs?{VIEW_URL_KEY}={vid}"
            f"&workflowType=machine_learning{mode}")
