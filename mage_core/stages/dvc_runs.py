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
(``stages.code_deps``: the import closure of its entry point): a run's ``train_code`` and
``evaluate_code``, a warm start's and a data task's ``code``, the report's ``report_code``. DVC
cannot template a list of deps, so dvc.yaml holds one slot per path (``- ${item.train_code[3]}``)
under a ``# code: item.train_code`` line, as many as the longest list of that kind, and a shorter
list repeats its first path in the slots it does not fill (a repeated path is one dependency).
The generator writes both files: the lists here, the number of slots in dvc.yaml.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any, Callable, Mapping

import yaml

from mage_core.config import parse_config, run_data, warm_start_data
from mage_core.envs.registry import task
from mage_core.io.atomic import write_text_atomic
from mage_core.stages import code_deps

RUNS_FILE = "dvc.runs.yaml"
#: The top-level key (params.yaml's keys share DVC's interpolation context with it).
KEY = "stage_runs"
#: The warm starts (``sft@<task>``), ``warm_start.tasks`` of params.yaml.
WARM_KEY = "warm_starts"
#: The data tasks (``data@<task>``), the ``data`` sections of params.yaml.
DATA_KEY = "data_tasks"
#: The report stage's code.
REPORT_KEY = "report_code"
#: A ``# code: NAME`` line of dvc.yaml and the slot lines under it (``- ${NAME[i]}``).
_SLOTS = re.compile(r"^(?P<indent>[ \t]*)# code: (?P<name>[\w.]+)[ \t]*\n(?P<slots>(?:(?P=indent)- \$\{(?P=name)\[\d+\]\}[ \t]*\n)*)",
                    re.MULTILINE)
HEADER = (
    "# Generated from params.yaml (reproduce.runs, warm_start.tasks, data) and the code by `mage reproduce`\n"
    "# or `mage validate --sync-dvc`: do not edit. What each stage reads: its task's data folder (or its\n"
    "# task's own code folder) and the code its command can load (mage_core/stages/dvc_runs.py).\n"
)


def task_inputs(cfg: Any) -> str:
    """What a run of ``cfg`` reads of its task besides the code: its data folder, or its
    own code folder for a task without data files."""
    env = cfg.env.name
    return str(getattr(cfg.env, env).data_path) if task(env).data is not None else f"mage_core/envs/{env}"


#: (kind of stage, task) -> its code list (``code_deps.stage_files``). Memoized per project, so a
#: list recurring over many runs is one object and the YAML writes it once (an anchor).
CodeLists = Callable[[str, "str | None"], list[str]]


def _code_lists(project: Path) -> CodeLists:
    return functools.cache(lambda kind, game: code_deps.stage_files(project, kind, game))


def run_inputs(data: Mapping[str, Any], source: str = "params.yaml",
               code: CodeLists | None = None) -> dict[str, dict[str, Any]]:
    """Run name -> ``{"env", "inputs", "init"}`` for every run of ``data``'s
    ``reproduce.runs`` (in its order): ``init`` is the folder of the warm start it
    starts from (``sft@<task>``'s output), else ``inputs`` again; with ``code``, also its
    ``train_code`` and ``evaluate_code``. ConfigError for a bad params file or run."""
    data = dict(data)
    runs = parse_config(data, source).reproduce.runs
    out: dict[str, dict[str, Any]] = {}
    for name in runs:
        cfg = parse_config(run_data(data, name, source), f"{source} as run {name}")
        inputs, init = task_inputs(cfg), cfg.init_model()
        out[name] = {"env": cfg.env.name, "inputs": inputs,
                     "init": str(Path(init).parent) if init is not None else inputs}
        if code is not None:
            out[name].update(train_code=code("train", cfg.env.name), evaluate_code=code("evaluate", cfg.env.name))
    return out


def warm_starts(data: Mapping[str, Any], source: str = "params.yaml",
                code: CodeLists | None = None) -> dict[str, dict[str, Any]]:
    """Task -> ``{"inputs", "out"}`` for every task of ``warm_start.tasks``: the ``sft@<task>``
    stages; with ``code``, also its ``code``."""
    cfg = parse_config(dict(data), source)
    out: dict[str, dict[str, Any]] = {}
    for name in cfg.warm_start.tasks:
        one = parse_config(warm_start_data(dict(data), name, source), f"{source} as the warm start of {name}")
        out[name] = {"inputs": task_inputs(one), "out": f"{cfg.warm_start.output_dir}/{name}"}
        if code is not None:
            out[name]["code"] = code("sft", name)
    return out


def data_tasks(data: Mapping[str, Any], code: CodeLists) -> dict[str, dict[str, Any]]:
    """Task -> ``{"code"}`` for every ``data.<task>`` section of params.yaml (a task with data
    files): the ``data@<task>`` stages."""
    return {name: {"code": code("data", name)} for name in (data.get("data") or {}) if task(name).data is not None}


def _pad(lists: list[list[str]]) -> int:
    """The slots a kind needs: its longest list (at least one)."""
    return max([1, *(len(x) for x in lists)])


def render(data: Mapping[str, Any], source: str = "params.yaml",
           project: Path | None = None) -> tuple[str, dict[str, int]]:
    """The text of ``dvc.runs.yaml`` for params ``data`` and the code of ``project`` (the folder
    holding ``mage_core``; default: this package's), and the slots each code list of dvc.yaml needs."""
    code = _code_lists(project if project is not None else Path(code_deps.__file__).resolve().parents[2])
    runs, warm, tasks = run_inputs(data, source, code), warm_starts(data, source, code), data_tasks(data, code)
    report = code("report", None)
    slots = {"item.train_code": _pad([r["train_code"] for r in runs.values()]),
             "item.evaluate_code": _pad([r["evaluate_code"] for r in runs.values()]),
             "item.code": _pad([w["code"] for w in [*warm.values(), *tasks.values()]]),
             REPORT_KEY: _pad([report])}
    padded: dict[tuple[int, str], list[str]] = {}

    def pad(values: list[str], name: str) -> list[str]:
        """``values`` filled up to the slots of ``name`` with its first path; one object per
        (list, slots), so that a list shared by many runs is written once."""
        key = (id(values), name)
        if key not in padded:
            padded[key] = values + [values[0]] * (slots[name] - len(values))
        return padded[key]

    for r in runs.values():
        r["train_code"], r["evaluate_code"] = pad(r["train_code"], "item.train_code"), pad(r["evaluate_code"],
                                                                                           "item.evaluate_code")
    for w in [*warm.values(), *tasks.values()]:
        w["code"] = pad(w["code"], "item.code")
    text = HEADER + yaml.safe_dump({KEY: runs, WARM_KEY: warm, DATA_KEY: tasks, REPORT_KEY: pad(report, REPORT_KEY)},
                                   sort_keys=False, default_flow_style=None, width=120)
    return text, slots


def with_slots(dvc_yaml: str, slots: Mapping[str, int]) -> str:
    """``dvc_yaml`` with the slot lines under each ``# code: NAME`` line made ``slots[NAME]`` in
    number (``- ${NAME[0]}`` ...). KeyError naming an unknown list."""
    def fill(match: re.Match[str]) -> str:
        name, indent = match["name"], match["indent"]
        if name not in slots:
            raise KeyError(f"dvc.yaml: `# code: {name}` names no code list of dvc.runs.yaml ({', '.join(slots)})")
        return f"{indent}# code: {name}\n" + "".join(f"{indent}- ${{{name}[{i}]}}\n" for i in range(slots[name]))

    return _SLOTS.sub(fill, dvc_yaml)


def _current(workspace: Path) -> tuple[dict[Path, str], dict[Path, str]]:
    """``workspace``'s generated files as they are and as its params.yaml and code give them."""
    params = workspace / "params.yaml"
    data = yaml.safe_load(params.read_text(encoding="utf-8")) or {}
    runs, slots = render(data, str(params), workspace)
    graph = workspace / "dvc.yaml"
    have = {path: path.read_text(encoding="utf-8") for path in (workspace / RUNS_FILE, graph) if path.is_file()}
    want = {workspace / RUNS_FILE: runs}
    if graph in have:
        want[graph] = with_slots(have[graph], slots)
    return have, want


def stale(workspace: Path) -> str | None:
    """Why ``workspace``'s dvc.runs.yaml (or dvc.yaml's code slots) do not match its params.yaml
    and code (None: they do)."""
    have, want = _current(workspace)
    for path, text in want.items():
        if path not in have:
            return f"{path}: missing"
        if have[path] != text:
            what = "the code slots of " if path.name == "dvc.yaml" else ""
            return (f"{what}{path}: does not match reproduce.runs, warm_start.tasks and data in "
                    f"{workspace / 'params.yaml'} and the imports of {workspace / 'mage_core'}")
    return None


def write(workspace: Path) -> bool:
    """Rewrite ``workspace``'s dvc.runs.yaml and dvc.yaml's code slots from its params.yaml and code
    where they differ; True if anything changed."""
    have, want = _current(workspace)
    changed = False
    for path, text in want.items():
        if have.get(path) != text:
            write_text_atomic(path, text)
            changed = True
    return changed
