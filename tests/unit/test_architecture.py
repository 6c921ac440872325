"""The import rules of docs/architecture.md, checked by walking every module's imports.

- game rules and opponents know nothing of language models (no torch/transformers);
- only mage_core/backends imports vllm, deepspeed or ray;
- only mage_core/tracking imports mlflow;
- nothing in mage_core imports prefect;
- code outside mage_core/envs/ never branches on a game's name, and packages import only
  down the layers;
- no module above the games' layer (stages, evaluation, trainers...) names a game's module:
  a game's analyses are reached through its task;
- no two files import each other, directly or round a circle.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

PACKAGE = Path(__file__).resolve().parents[2] / "mage_core"

# (folder the rule applies to, or "" for the whole package; forbidden top-level
#  modules; sub-folder that is exempt)
RULES: list[tuple[str, set[str], str | None]] = [
    ("envs", {"torch", "transformers", "mlflow", "prefect", "vllm", "deepspeed", "ray"}, None),
    ("opponents", {"torch", "transformers", "mlflow", "prefect", "vllm", "deepspeed", "ray"}, None),
    ("", {"vllm", "deepspeed", "ray"}, "backends"),
    ("", {"mlflow"}, "tracking"),
    ("", {"prefect"}, None),
]


def imported_top_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_the_walker_sees_nested_and_lazy_imports(tmp_path: Path) -> None:
    probe = tmp_path / "m.py"
    probe.write_text("def f():\n    import torch.nn\n    from mlflow import log_metric\n")
    assert imported_top_modules(probe) == {"torch", "mlflow"}


@pytest.mark.parametrize(("folder", "forbidden", "exempt"), RULES)
def test_import_arrows(folder: str, forbidden: set[str], exempt: str | None) -> None:
    root = PACKAGE / folder if folder else PACKAGE
    files = sorted(root.rglob("*.py"))
    assert files, f"no modules under {root}"
    offenders = []
    for path in files:
        rel = path.relative_to(PACKAGE)
        if exempt and rel.parts[0] == exempt:
            continue
        bad = imported_top_modules(path) & forbidden
        if bad:
            offenders.append(f"{rel}: {sorted(bad)}")
    assert not offenders, "forbidden imports:\n" + "\n".join(offenders)


# ---- game knowledge stays in mage_core/envs/ (docs/architecture.md, "Tasks") ----

def game_name_comparisons(path: Path, games: set[str]) -> list[str]:
    """``line: source`` of every comparison (``==``, ``!=``, ``in``, ``not in``) with a
    task's name as a literal operand, alone or inside a tuple, list or set literal."""

    def names_a_game(node: ast.AST) -> bool:
        if isinstance(node, ast.Constant):
            return node.value in games
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return any(names_a_game(element) for element in node.elts)
        return False

    source = path.read_text(encoding="utf-8")
    found = []
    for node in ast.walk(ast.parse(source, filename=str(path))):
        if isinstance(node, ast.Compare) and any(
                isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops):
            if any(names_a_game(operand) for operand in [node.left, *node.comparators]):
                found.append(f"{node.lineno}: {ast.get_source_segment(source, node)}")
    return found


def test_the_comparison_finder_sees_every_form(tmp_path: Path) -> None:
    probe = tmp_path / "m.py"
    probe.write_text('a = env == "kuhn_poker"\nb = g in ("webshop", "x")\nc = "sokoban" != g\n'
                     'd = [g for g in xs if g not in {"alfworld"}]\ne = g == "kuhn"\nf = name == "random"\n')
    assert [line.split(":")[0] for line in game_name_comparisons(
        probe, {"kuhn_poker", "webshop", "sokoban", "alfworld"})] == ["1", "2", "3", "4"]


def test_no_code_outside_envs_branches_on_a_game_name() -> None:
    # Code outside mage_core/envs/ asks the task (mage_core.envs.registry.task) what it is;
    # a comparison against a name is the `if game == ...` a new environment would have to find.
    from mage_core.envs.registry import GAMES

    offenders = [f"{path.relative_to(PACKAGE)}:{hit}" for path in sorted(PACKAGE.rglob("*.py"))
                 if path.relative_to(PACKAGE).parts[0] != "envs"
                 for hit in game_name_comparisons(path, set(GAMES))]
    assert offenders == [], "compare against the task's declared fields instead:\n" + "\n".join(offenders)


# ---- the layers of docs/architecture.md ("Layers") ----

#: Lowest first. A package imports only its own layer's packages and those below (lazy imports
#: inside functions included); the top-level modules cli (with its commands' parts,
#: cli_commands and cli_tasks) and __main__ sit above everything.
LAYERS: list[set[str]] = [
    {"schema", "io", "algos"},
    {"envs", "opponents"},  # the games: a Task names its opponent catalogue
    {"policy", "config", "generation"},
    {"rollout"},
    {"backends"},
    {"evaluation"},
    {"tracking"},
    {"trainers"},
    {"stages"},
    {"cli", "cli_commands", "cli_tasks", "__main__"},
]


def internal_imports(path: Path) -> set[str]:
    """The ``mage_core.*`` modules ``path`` imports, at any depth of its syntax tree."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("mage_core."))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("mage_core."):
            found.add(node.module)  # type: ignore[arg-type]
    return found


def layer_of(package: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if package in layer)


def test_every_package_has_a_layer() -> None:
    packages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    packages |= {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    assert packages == set().union(*LAYERS)


def test_imports_point_down_the_layers() -> None:
    upward: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.name == "__init__.py" and len(rel.parts) == 1:
            continue
        importer = rel.parts[0].removesuffix(".py")
        upward += [f"{rel} imports {module} (layer {layer_of(module.split('.')[1])} > {layer_of(importer)})"
                   for module in internal_imports(path) if layer_of(module.split(".")[1]) > layer_of(importer)]
    assert upward == [], "an import against the layers of docs/architecture.md:\n" + "\n".join(upward)


# ---- the games' rooms and the import graph (docs/architecture.md, "Layers" and "Tasks") ----

#: The games' folders under mage_core/envs/: each game's rules, environment, task and analyses.
ROOMS = sorted(p.name for p in (PACKAGE / "envs").iterdir() if (p / "__init__.py").is_file())
#: Files and folders that may name a game's modules: the games' own layer (envs/, and opponents/,
#: whose players play the rules) and the command line, whose game sub-commands (`mage webshop
#: check`, `mage alfworld generate`...) name their game's commands.py.
MAY_NAME_A_GAME = {"envs", "opponents", "cli.py", "cli_tasks.py"}
#: A whole string that names a game's module, as ``registry.resolve`` or ``import_module`` takes it.
_GAME_REFERENCE = re.compile(rf"mage_core\.envs\.({'|'.join(ROOMS)})(\.\w+)*(:\w+)?")


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def referenced_modules(path: Path) -> set[str]:
    """Every ``mage_core.*`` module ``path`` imports, at any depth of its syntax tree (inside
    functions and ``if TYPE_CHECKING:`` blocks too), the names of ``from a import b`` as
    ``a.b`` too (b may be a module), and every string that is a whole ``"module:attribute"``
    or module reference into a game's folder (what ``registry.resolve`` imports)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = set(internal_imports(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("mage_core."):
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _GAME_REFERENCE.fullmatch(node.value):
            found.add(node.value.partition(":")[0])
    return found


def names_a_game(module: str) -> bool:
    return any(module == f"mage_core.envs.{room}" or module.startswith(f"mage_core.envs.{room}.") for room in ROOMS)


def test_the_reference_finder_sees_every_form(tmp_path: Path) -> None:
    probe = tmp_path / "m.py"
    probe.write_text('def f():\n    from mage_core.envs import kuhn_poker\n'
                     'if TYPE_CHECKING:\n    import mage_core.envs.webshop.env\n'
                     'HOOK = "mage_core.envs.tic_tac_toe.commands:analyze"\n'
                     'DOC = "see mage_core.envs.sokoban.env for the rules"\n'
                     'from mage_core.envs.registry import task\n')
    assert sorted(m for m in referenced_modules(probe) if names_a_game(m)) == [
        "mage_core.envs.kuhn_poker", "mage_core.envs.tic_tac_toe.commands", "mage_core.envs.webshop.env"]


def test_no_module_outside_the_games_layer_names_a_game_module() -> None:
    # Stages, evaluation, trainers (and every other package above the games) reach a game's
    # analyses, data commands and expert through its task (Task.exact_values, .strategy_probes,
    # .analyze, .data, .expert: mage_core.envs.registry.task), never by importing its folder: a
    # new game then touches its own folder and the registry, not the packages above.
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(PACKAGE).parts[0] in MAY_NAME_A_GAME:
            continue
        named = {module for module in referenced_modules(path) if names_a_game(module)}
        offenders += [f"{path.relative_to(PACKAGE)}: {module}" for module in sorted(named)
                      if module.rpartition(".")[0] not in named]  # a module, not each name imported from it
    assert offenders == [], "ask the task (mage_core.envs.registry.task) instead:\n" + "\n".join(offenders)


def import_graph(root: Path) -> dict[str, set[str]]:
    """File -> the files it imports (``referenced_modules`` that are files under ``root``'s
    package; ``from a import b`` counts as ``a.b`` where that is a module, else ``a``)."""
    files = {module_name(p, root): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets.update(sub if (sub := f"{node.module}.{alias.name}") in files else node.module
                               for alias in node.names)
        graph[name] = {t for t in targets if t in files and t != name}
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one file (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


def test_the_circle_finder_sees_lazy_and_type_checking_imports(tmp_path: Path) -> None:
    package = tmp_path / "mage_core"
    (package / "p").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "p" / "__init__.py").write_text("")
    (package / "p" / "a.py").write_text("def f():\n    from mage_core.p import b\n")
    (package / "p" / "b.py").write_text("if TYPE_CHECKING:\n    from mage_core.p.c import C\n")
    (package / "p" / "c.py").write_text("import mage_core.p.a\n")
    (package / "d.py").write_text("from mage_core.p import a\n")
    assert import_circles(import_graph(package)) == [["mage_core.p.a", "mage_core.p.b", "mage_core.p.c"]]


def test_no_import_circle_between_files() -> None:
    # Counted: every import a file names, wherever it stands (module level, inside a function,
    # under TYPE_CHECKING): a lazy import only postpones the circle, and a circle through type
    # hints still ties the two files together. Not counted: the package __init__ that Python
    # runs before a submodule (importing mage_core.config.tasks runs mage_core/config/__init__.py),
    # which every submodule of a package shares. Packages on different layers cannot form a
    # circle (test_imports_point_down_the_layers); envs/ and opponents/ share the games' layer.
    circles = import_circles(import_graph(PACKAGE))
    assert circles == [], "files that import each other, directly or round a circle:\n" + "\n".join(
        " <-> ".join(circle) for circle in circles)
