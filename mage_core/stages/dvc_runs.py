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
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import yaml

from mage_core.config import parse_config, run_data, warm_start_data
from mage_core.envs.registry import task
from mage_core.io.atomic import write_text_atomic

RUNS_FILE = "dvc.runs.yaml"
#: The top-level key (params.yaml's keys share DVC's interpolation context with it).
KEY = "stage_runs"
#: The warm starts (``sft@<task>``), ``warm_start.tasks`` of params.yaml.
WARM_KEY = "warm_starts"
HEADER = (
    "# Generated from params.yaml (reproduce.runs) by `mage reproduce` or `mage validate --sync-dvc`:\n"
    "# do not edit. The one path each run's train and evaluate stages read besides mage_core and\n"
    "# params: its task's data folder, or its task's own code folder (mage_core/stages/dvc_runs.py).\n"
)


def task_inputs(cfg: Any) -> str:
    """What a run of ``cfg`` reads of its task besides the code: its data folder, or its
    own code folder for a task without data files."""
    env = cfg.env.name
    return str(getattr(cfg.env, env).data_path) if task(env).data is not None else f"mage_core/envs/{env}"


def run_inputs(data: Mapping[str, Any], source: str = "params.yaml") -> dict[str, dict[str, str]]:
    """Run name -> ``{"env", "inputs", "init"}`` for every run of ``data``'s
    ``reproduce.runs`` (in its order): ``init`` is the folder of the warm start it
    starts from (``sft@<task>``'s output), else ``inputs`` again. ConfigError for a
    bad params file or run."""
    data = dict(data)
    runs = parse_config(data, source).reproduce.runs
    out: dict[str, dict[str, str]] = {}
    for name in runs:
        cfg = parse_config(run_data(data, name, source), f"{source} as run {name}")
        inputs, init = task_inputs(cfg), cfg.init_model()
        out[name] = {"env": cfg.env.name, "inputs": inputs,
                     "init": str(Path(init).parent) if init is not None else inputs}
    return out


def warm_starts(data: Mapping[str, Any], source: str = "params.yaml") -> dict[str, dict[str, str]]:
    """Task -> ``{"inputs", "out"}`` for every task of ``warm_start.tasks``: the ``sft@<task>`` stages."""
    cfg = parse_config(dict(data), source)
    out = {}
    for name in cfg.warm_start.tasks:
        one = parse_config(warm_start_data(dict(data), name, source), f"{source} as the warm start of {name}")
        out[name] = {"inputs": task_inputs(one), "out": f"{cfg.warm_start.output_dir}/{name}"}
    return out


def render(data: Mapping[str, Any], source: str = "params.yaml") -> str:
    """The text of ``dvc.runs.yaml`` for params ``data``."""
    return HEADER + yaml.safe_dump({KEY: run_inputs(data, source), WARM_KEY: warm_starts(data, source)},
                                   sort_keys=False, default_flow_style=None)


def _current(workspace: Path) -> tuple[Path, str]:
    """``workspace``'s dvc.runs.yaml and the text its params.yaml gives."""
    params = workspace / "params.yaml"
    data = yaml.safe_load(params.read_text(encoding="utf-8")) or {}
    return workspace / RUNS_FILE, render(data, str(params))


def stale(workspace: Path) -> str | None:
    """Why ``workspace``'s dvc.runs.yaml does not match its params.yaml (None: it does)."""
    path, text = _current(workspace)
    if not path.is_file():
        return f"{path}: missing"
    if path.read_text(encoding="utf-8") != text:
        return f"{path}: does not match reproduce.runs and warm_start.tasks in {workspace / 'params.yaml'}"
    return None


def write(workspace: Path) -> bool:
    """Rewrite ``workspace``'s dvc.runs.yaml from its params.yaml when it differs; True if it changed."""
    path, text = _current(workspace)
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return False
    write_text_atomic(path, text)
    return True
