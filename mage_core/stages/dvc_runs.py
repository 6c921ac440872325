"""``dvc.runs.yaml``: the one path each run of ``reproduce.runs`` reads besides the code.

A run's train and evaluate stages depend on ``mage_core`` and their params; a run of a
task whose problems live in files (WebShop's catalogue, ALFWorld's games) also reads
that task's data folder (``env.<name>.data_path``), and no other task's. DVC's templating
cannot give each item of a ``foreach`` its own list of dependencies, nor look a key up by
another item's value (docs/architecture.md, "Stages and lineage"), so this file, generated
from params.yaml, names that path per run and dvc.yaml iterates over it:

- a task with data files: its data folder (``data/webshop``), the output of ``data@webshop``;
- any other task: its own folder of code (``mage_core/envs/kuhn_poker``; inside
  ``mage_core`` already, named because DVC needs one path per item).

So ``dvc status`` of a Kuhn stage lists no WebShop or ALFWorld data, and a change to the
ALFWorld generator re-runs only the ALFWorld stages. ``mage reproduce`` rewrites the file
(in the project and in every profile or sweep workspace) before it runs the graph;
``mage validate`` reports a stale one and ``mage validate --sync-dvc`` rewrites it, for
those who call ``dvc repro`` themselves.

Each stage also depends on the code its command can load, not on the whole of ``mage_core``
(``stages.code_deps``: the import closure of its entry point), through that closure's manifest,
which dvc.yaml's ``code`` stage writes: a run's ``train_code`` and ``evaluate_code``, a warm
start's and a data task's ``code``, the report's ``report_code`` name it. The names depend on the
kind of stage and the task only, so this file follows params.yaml alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import yaml

from mage_core.config import parse_config, run_data, warm_start_data
from mage_core.envs.registry import task
from mage_core.io.atomic import write_text_atomic
from mage_core.stages.code_deps import manifest_path

RUNS_FILE = "dvc.runs.yaml"
#: The top-level key (params.yaml's keys share DVC's interpolation context with it).
KEY = "stage_runs"
#: The warm starts (``sft@<task>``), ``warm_start.tasks`` of params.yaml.
WARM_KEY = "warm_starts"
#: The data tasks (``data@<task>``), the ``data`` sections of params.yaml.
DATA_KEY = "data_tasks"
#: The report stage's code (its manifest).
REPORT_KEY = "report_code"
#: The ablations stage's code (its manifest).
ABLATIONS_KEY = "ablations_code"
HEADER = (
    "# Generated from params.yaml (reproduce.runs, warm_start.tasks, data) by `mage reproduce` or\n"
    "# `mage validate --sync-dvc`: do not edit. What each stage reads: its task's data folder (or its\n"
    "# task's own code folder) and the manifest of the code its command can load (mage_core/stages/dvc_runs.py).\n"
)


def task_inputs(cfg: Any) -> str:
    """What a run of ``cfg`` reads of its task besides the code: its data folder, or its
    own code folder for a task without data files."""
    env = cfg.env.name
    return str(getattr(cfg.env, env).data_path) if task(env).data is not None else f"mage_core/envs/{env}"


def run_inputs(data: Mapping[str, Any], source: str = "params.yaml",
               code: bool = False) -> dict[str, dict[str, Any]]:
    """Run name -> ``{"env", "inputs", "init", "spec"}`` for every run of ``data``'s
    ``reproduce.runs`` (in its order), then every point of ``reproduce.ablations`` that is no
    other run (``mage_core.config.ablations``): ``init`` is the folder of the warm start it
    starts from (``sft@<task>``'s output), else ``inputs`` again; ``spec`` the params key that
    defines it (``reproduce.runs.<run>``, or ``sweep.grids.<grid>``); with ``code``, also its
    ``train_code`` and ``evaluate_code`` manifests. ConfigError for a bad params file or run."""
    from mage_core.config.ablations import ablation_runs

    data = dict(data)
    runs = parse_config(data, source).reproduce.runs
    specs = {name: f"reproduce.runs.{name}" for name in runs}
    # The points of reproduce.ablations that no other run already is: their params key is their grid.
    specs.update({name: f"sweep.grids.{point.grid}" for name, point in ablation_runs(data, source).items()
                  if point.reuses is None})
    out: dict[str, dict[str, Any]] = {}
    for name, spec in specs.items():
        cfg = parse_config(run_data(data, name, source), f"{source} as run {name}")
        inputs, init = task_inputs(cfg), cfg.init_model()
        out[name] = {"env": cfg.env.name, "inputs": inputs,
                     "init": str(Path(init).parent) if init is not None else inputs, "spec": spec}
        if code:
            out[name].update(train_code=manifest_path("train", cfg.env.name),
                             evaluate_code=manifest_path("evaluate", cfg.env.name))
    return out


def warm_starts(data: Mapping[str, Any], source: str = "params.yaml", code: bool = False,
                runs: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, dict[str, Any]]:
    """Task -> ``{"inputs", "out"}`` for every task of ``warm_start.tasks`` that a run trains on
    (``runs``: ``run_inputs(data)``, computed when not given): the ``sft@<task>`` stages (a warm
    start no run starts from, as in a profile of a few runs, is no stage); with ``code``, also its
    ``code`` manifest."""
    cfg = parse_config(dict(data), source)
    used = {run["env"] for run in (run_inputs(data, source) if runs is None else runs).values()}
    out: dict[str, dict[str, Any]] = {}
    for name in cfg.warm_start.tasks:
        if name not in used:
            continue
        one = parse_config(warm_start_data(dict(data), name, source), f"{source} as the warm start of {name}")
        out[name] = {"inputs": task_inputs(one), "out": f"{cfg.warm_start.output_dir}/{name}"}
        if code:
            out[name]["code"] = manifest_path("sft", name)
    return out


def data_tasks(data: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Task -> ``{"code"}`` (its manifest) for every ``data.<task>`` section of params.yaml (a task
    with data files): the ``data@<task>`` stages."""
    return {name: {"code": manifest_path("data", name)} for name in (data.get("data") or {})
            if task(name).data is not None}


def render(data: Mapping[str, Any], source: str = "params.yaml") -> str:
    """The text of ``dvc.runs.yaml`` for params ``data``."""
    runs = run_inputs(data, source, code=True)
    files = {KEY: runs, WARM_KEY: warm_starts(data, source, code=True, runs=runs),
             DATA_KEY: data_tasks(data), REPORT_KEY: manifest_path("report", None),
             ABLATIONS_KEY: manifest_path("ablations", None)}
    return HEADER + yaml.safe_dump(files, sort_keys=False, default_flow_style=False, width=120)


def stale(workspace: Path) -> str | None:
    """Why ``workspace``'s dvc.runs.yaml does not match its params.yaml (None: it does)."""
    path, want = _wanted(workspace)
    if not path.is_file():
        return f"{path}: missing"
    if path.read_text(encoding="utf-8") != want:
        return f"{path}: does not match reproduce.runs, warm_start.tasks and data in {workspace / 'params.yaml'}"
    return None


def write(workspace: Path) -> bool:
    """Rewrite ``workspace``'s dvc.runs.yaml from its params.yaml where it differs; True if it changed."""
    path, want = _wanted(workspace)
    if path.is_file() and path.read_text(encoding="utf-8") == want:
        return False
    write_text_atomic(path, want)
    return True


def _wanted(workspace: Path) -> tuple[Path, str]:
    params = workspace / "params.yaml"
    data = yaml.safe_load(params.read_text(encoding="utf-8")) or {}
    return workspace / RUNS_FILE, render(data, str(params))
