"""What code a stage runs: its DVC dependencies, from the imports of its command.

Every stage used to depend on the whole of ``mage_core``, so any edit (a typo in a table's prose)
made every stage stale. Here each stage depends on the project modules its command can load,
read from the code (the import closure of its entry point):

- every ``import`` and ``from ... import`` of a module, at module level or inside a function
  (a lazy import counts: it can run), and the packages above each module (their ``__init__``);
- every string that names a project module (``"mage_core.backends.hf"``,
  ``"mage_core.envs.sokoban.env:SokobanEnv"``, or an f-string made of such text and module-level
  string constants, ``f"{_HERE}.probes:suite_probes"``): the name registries and the Task
  descriptors load modules that way (docs/architecture.md, style rule 4);
- with two limits, so that a task's stage does not depend on every other task's code: the task
  registry's list of task modules is not followed, and a task module of *another* task is followed
  only as far as the configuration loads every task (its module-level imports and the classes it
  names for the configuration: ``FOREIGN_TASK_KEYS``; its hooks, functions that import the task's
  own code when called, run only in that task's stages), while the stage's own task module is
  followed whole (the report, a stage of no one task, follows every task module as another's);
- the command line's modules without the other commands' stages (``_cmd_*`` functions import
  their stage when they run: only the stage's own command's is followed, as its entry point).

The result is an over-approximation (a lazy import on a path the stage never takes still counts),
which is safe: a module that can run is a dependency. ``tests/integration/test_code_deps.py``
runs each kind of stage and fails if it loaded a project module missing from its dependencies.

DVC learns them through one small file per (kind of stage, task), a *manifest*: the md5 and path
of every file of the closure, in ``md5sum`` form (``md5sum -c`` checks it), written by dvc.yaml's
``code`` stage (``mage code-deps``), which depends on ``mage_core`` as one folder. Each stage
depends on its manifest, so an edit reruns the code stage (a second), then exactly the stages
whose manifest changed. Listing every file under every stage instead made dvc.lock 1.8 MB, which
DVC parses (pure-Python YAML, about 4 s) several times per stage.
"""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Iterable

PACKAGE = "mage_core"
#: A string naming a project module, optionally an attribute of it (``module:attr``).
_REFERENCE = re.compile(r"^(mage_core(?:\.[A-Za-z_]\w*)+)(?::[A-Za-z_]\w*)?$")
#: The module listing the tasks by name (its list is not followed: see the module docstring).
REGISTRY = "mage_core.envs.registry"
#: Keywords of a Task (or its TaskData) whose modules the configuration loads for every task:
#: its ``env.<name>`` and ``data.<name>`` sections, its out-of-domain suite schema, and the
#: opponent catalogues the populations of the two-player games are checked against.
FOREIGN_TASK_KEYS = ("params", "ood_suite", "opponents")
#: The command line's modules: followed without their ``_cmd_*`` functions.
CLI_MODULES = ("mage_core.__main__", "mage_core.cli", "mage_core.cli_commands", "mage_core.cli_tasks")
#: Each kind of stage's entry point, the stage module its command runs.
ENTRIES = {
    "train": ("mage_core.stages.train",),
    "evaluate": ("mage_core.stages.evaluate",),
    "sft": ("mage_core.stages.sft",),
    "report": ("mage_core.stages.report",),
    "ablations": ("mage_core.stages.ablations",),
    "data": (),  # the task's own generator (``TaskData.generate``), followed as its own task's
}


@dataclass(frozen=True)
class _Module:
    imports: frozenset[str]  # candidate module names it imports (some may be attributes, not modules)
    top_imports: frozenset[str]  # those imported at module level (not inside a function)
    references: frozenset[str]  # project modules its string constants name
    keyed: tuple[tuple[str, str], ...]  # (keyword, module) of string references passed as keyword arguments


def module_file(root: Path, name: str) -> Path | None:
    """The source file of project module ``name`` under ``root`` (a package's ``__init__.py``)."""
    path = root.joinpath(*name.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _resolve_from(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _parse(root: Path, name: str, skip_cmd: bool) -> _Module:
    path = module_file(root, name)
    assert path is not None, name
    return _parse_source(path.read_text(encoding="utf-8"), name, path.name == "__init__.py", skip_cmd)


@cache  # by the source text itself: an edited file is read again
def _parse_source(source: str, name: str, is_package: bool, skip_cmd: bool) -> _Module:
    tree = ast.parse(source, name)
    imports: set[str] = set()
    top_imports: set[str] = set()
    references: set[str] = set()
    keyed: list[tuple[str, str]] = []
    # module-level string constants, for f-strings built from them (f"{_HERE}.probes:suite_probes")
    consts = {node.targets[0].id: node.value.value for node in tree.body
              if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
              and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)}

    def text(node: ast.AST) -> str | None:
        """A string constant's value, or an f-string's made of constants and module-level string names."""
        if isinstance(node, ast.Constant):
            return node.value if isinstance(node.value, str) else None
        if not isinstance(node, ast.JoinedStr):
            return None
        parts = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                parts.append(str(part.value))
            elif (isinstance(part, ast.FormattedValue) and isinstance(part.value, ast.Name)
                  and part.value.id in consts and part.conversion == -1 and part.format_spec is None):
                parts.append(consts[part.value.id])
            else:
                return None
        return "".join(parts)

    def visit(node: ast.AST, in_function: bool = False) -> None:
        if skip_cmd and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("_cmd_"):
            return
        found: list[str] = []
        if isinstance(node, ast.Import):
            found = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve_from(name, is_package, node)
            found = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.keyword) and node.arg and text(node.value) is not None:
            match = _REFERENCE.match(text(node.value) or "")
            if match:
                keyed.append((node.arg, match.group(1)))
        elif text(node) is not None:
            match = _REFERENCE.match(text(node) or "")
            if match:
                references.add(match.group(1))
        imports.update(found)
        if not in_function:
            top_imports.update(found)
        inside = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            visit(child, inside)

    visit(tree)
    references.update(module for _, module in keyed)
    ours = lambda names: frozenset(i for i in names if i.split(".")[0] == PACKAGE)  # noqa: E731
    return _Module(ours(imports), ours(top_imports), frozenset(references), tuple(keyed))


def _task_game(name: str) -> str | None:
    """The task a task module declares (``mage_core.envs.<game>.task``), else None."""
    parts = name.split(".")
    return parts[2] if len(parts) == 4 and parts[:2] == ["mage_core", "envs"] and parts[3] == "task" else None


def closure(root: Path, entries: Iterable[str], game: str | None, games: Iterable[str]) -> set[str]:
    """The project modules that can load when ``entries`` run for task ``game``, whose task module is
    followed whole. None: a stage of no one task (the report, which reads the tasks' descriptors and
    calls none of their hooks): every task module is followed as another task's. ``games``: every task."""
    todo = [*CLI_MODULES, *entries, *(f"mage_core.envs.{g}.task" for g in games)]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen or module_file(root, name) is None:
            continue
        seen.add(name)
        parts = name.split(".")
        todo.extend(".".join(parts[:i]) for i in range(1, len(parts)))  # the packages above it
        info = _parse(root, name, name in CLI_MODULES)
        owner = _task_game(name)
        if owner is not None and owner != game:
            # another task: what loading its descriptor runs (module-level imports) and the classes
            # the configuration takes from it; its hooks (functions) run only in its own stages
            todo.extend(info.top_imports)
            todo.extend(module for key, module in info.keyed if key in FOREIGN_TASK_KEYS)
            continue
        todo.extend(info.imports)
        if name != REGISTRY:  # the registry's task list: each task module is an entry, followed as above
            todo.extend(info.references)
    return seen


def stage_files(project: Path, kind: str, game: str | None) -> list[str]:
    """The source files a stage of ``kind`` can load for task ``game`` (None: no one task, the
    report), sorted, relative to ``project`` (the folder holding ``mage_core``). A data stage's
    entry is its task's generator (``TaskData.generate``)."""
    from mage_core.envs.registry import GAMES, task

    if kind not in ENTRIES:
        raise KeyError(f"no kind of stage {kind!r} ({', '.join(ENTRIES)})")
    entries = list(ENTRIES[kind])
    if kind == "data":
        entries.append(task(game).data.generate.partition(":")[0])  # type: ignore[arg-type, union-attr]
    found = (module_file(project, m) for m in closure(project, entries, game, GAMES))
    return sorted({path.relative_to(project).as_posix() for path in found if path is not None})


#: Where dvc.yaml's ``code`` stage writes the manifests, relative to the project.
MANIFEST_DIR = "artifacts/code"


def manifest_path(kind: str, game: str | None) -> str:
    """The manifest of a stage of ``kind`` for task ``game`` (None: the report), relative to the project."""
    return f"{MANIFEST_DIR}/{kind}-{game}.md5" if game else f"{MANIFEST_DIR}/{kind}.md5"


def manifest_spec(path: str) -> tuple[str, str | None] | None:
    """(kind, task) of a manifest's path (``manifest_path``'s inverse); None for any other path."""
    prefix, suffix = f"{MANIFEST_DIR}/", ".md5"
    if not path.startswith(prefix) or not path.endswith(suffix):
        return None
    kind, _, game = path[len(prefix):-len(suffix)].partition("-")
    return kind, game or None


def manifest_text(project: Path, kind: str, game: str | None) -> str:
    """``md5  path`` for every file of ``stage_files``, in its order."""
    return "".join(f"{hashlib.md5((project / path).read_bytes()).hexdigest()}  {path}\n"
                   for path in stage_files(project, kind, game))


def manifest_specs() -> list[tuple[str, str | None]]:
    """Every (kind, task) a stage of dvc.yaml can be: train, evaluate and sft of every task, data of
    every task with data files, the report and the ablations' summary."""
    from mage_core.envs.registry import GAMES, task

    specs: list[tuple[str, str | None]] = [(kind, game) for game in GAMES for kind in ("train", "evaluate", "sft")]
    specs += [("data", game) for game in GAMES if task(game).data is not None]
    return [*specs, ("report", None), ("ablations", None)]


def write_manifests(project: Path, out: Path) -> list[Path]:
    """Write every manifest (``manifest_specs``) of ``project``'s code into ``out`` (created; a file
    of another name there is removed, so the folder holds exactly these), and ``records.txt``: the
    md5 of each manifest a recorded ablation verdict names (``ablation_records``). Returns the files."""
    from mage_core.io.atomic import write_text_atomic

    out.mkdir(parents=True, exist_ok=True)
    written = []
    for kind, game in manifest_specs():
        path = out / Path(manifest_path(kind, game)).name
        write_text_atomic(path, manifest_text(project, kind, game))
        written.append(path)
    from mage_core.stages.ablation_records import RECORDED_CODE, recorded_code_text

    # the manifests the recorded ablation verdicts name (reports/profiles: a dependency of this stage)
    write_text_atomic(out / RECORDED_CODE, recorded_code_text(project, out))
    written.append(out / RECORDED_CODE)
    for other in set(out.iterdir()) - set(written):
        if other.is_file():
            other.unlink()
    return written
